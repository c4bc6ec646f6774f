-- The writers' bound and the current epoch, in one value so that one read
-- gives both: bound * 2 + parity.  Every writer of a position or of an entry
-- of message_due_ix holds the epoch's parity (advisory lock 1819111690,
-- parity, shared, until it commits: _epoch_enter) and writes positions at
-- least the bound it read.  A raise of the marks (_marks_raise) starts a new
-- epoch with the other parity.  A sequence: not transactional, no row
-- versions, read under any snapshot as it is now.
CREATE SEQUENCE @extschema@.position_bound_seq AS bigint MINVALUE 0 START 0;

-- Called, so that pg_sequence_last_value reads it: a SELECT from the
-- sequence's relation, a seq scan, took 49 ms under the entry points'
-- enable_seqscan = off (measured), against 0.02 ms.
SELECT pg_catalog.setval('@extschema@.position_bound_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.position_bound_seq', '');

COMMENT ON SEQUENCE @extschema@.position_bound_seq IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: the current epoch, bound * 2 + parity; every position written in it is at least the bound.';
