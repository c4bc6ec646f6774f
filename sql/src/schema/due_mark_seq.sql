-- The due mark: no scheduled or locked message has a smaller dequeue_at.
-- The dequeue's due probe starts there.  Raised by _marks_raise.
CREATE SEQUENCE @extschema@.due_mark_seq AS bigint
MINVALUE -9223372036854775808 START -9223372036854775808;

-- Called, so that pg_sequence_last_value reads it: a SELECT from the
-- sequence's relation, a seq scan, took 49 ms under the entry points'
-- enable_seqscan = off (measured), against 0.02 ms.
SELECT pg_catalog.setval('@extschema@.due_mark_seq', -9223372036854775808, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.due_mark_seq', '');

COMMENT ON SEQUENCE @extschema@.due_mark_seq IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: no scheduled or locked message has a smaller dequeue_at (epoch ms).';
