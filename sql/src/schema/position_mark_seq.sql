-- The position mark: no ready message has a smaller position.  The take and
-- the producers' probes of message_ready_ix and message_channel_ix start
-- there, so under a held snapshot they do not walk the entries consumed
-- before it.  Raised by _marks_raise.
CREATE SEQUENCE @extschema@.position_mark_seq AS bigint MINVALUE 0 START 0;

-- Called, so that pg_sequence_last_value reads it: a SELECT from the
-- sequence's relation, a seq scan, took 49 ms under the entry points'
-- enable_seqscan = off (measured), against 0.02 ms.
SELECT pg_catalog.setval('@extschema@.position_mark_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.position_mark_seq', '');

COMMENT ON SEQUENCE @extschema@.position_mark_seq IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: no ready message has a smaller position.';
