-- A counter of lonnymq.metrics, lonnymq_messages_lock_expired_total: locks
-- that expired before their delivery was settled (each a failed delivery),
-- counted when a dequeue's promotion finds the lock lapsed.
-- A sequence, nextval per event in the statement that makes it: no row is
-- written and no statement added (doc/dequeue-design.md, "Counters as rows").
-- Not transactional: work that rolled back is counted, and a crash can
-- move it ahead by up to 32 (a sequence is logged 32 values ahead).
CREATE SEQUENCE @extschema@.messages_lock_expired_seq AS bigint MINVALUE 0 START 0;

-- (Called, so that pg_sequence_last_value reads 0, not NULL.)
SELECT pg_catalog.setval('@extschema@.messages_lock_expired_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.messages_lock_expired_seq', '');

COMMENT ON SEQUENCE @extschema@.messages_lock_expired_seq IS
'Metrics counter, internal state, not to be written by hand: locks that expired before their delivery was settled, counted when a dequeue finds the lock lapsed.';
