-- A counter of lonnymq.metrics, lonnymq_messages_failed_total: deliveries
-- failed by message_fail (a retry or a dead letter follows).
-- A sequence, nextval per event in the statement that makes it: no row is
-- written and no statement added (doc/dequeue-design.md, "Counters as rows").
-- Not transactional: work that rolled back is counted, and a crash can
-- move it ahead by up to 32 (a sequence is logged 32 values ahead).
CREATE SEQUENCE @extschema@.messages_failed_seq AS bigint MINVALUE 0 START 0;

-- (Called, so that pg_sequence_last_value reads 0, not NULL.)
SELECT pg_catalog.setval('@extschema@.messages_failed_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.messages_failed_seq', '');

COMMENT ON SEQUENCE @extschema@.messages_failed_seq IS
'Metrics counter, internal state, not to be written by hand: deliveries failed by message_fail (a retry or a dead letter follows).';
