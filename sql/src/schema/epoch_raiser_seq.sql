-- The transaction (xid8, as bigint) whose raise started the current epoch;
-- 0: none known.  A raise from a transaction-level snapshot (REPEATABLE
-- READ, SERIALIZABLE) goes ahead only when that transaction had ended
-- before its snapshot was taken: then the snapshot postdates the current
-- epoch's start, and the only writers it may miss are those of the
-- previous epoch (_marks_raise).  The one lonnymq sequence not registered
-- for pg_dump: a transaction id means nothing in another cluster (one from
-- its future would stop every REPEATABLE READ raise), and 0 after a restore
-- is safe: every writer of the dumped database has ended before any
-- snapshot of the restored one.
CREATE SEQUENCE @extschema@.epoch_raiser_seq AS bigint MINVALUE 0 START 0;

-- Called, so that pg_sequence_last_value reads it (see position_bound_seq).
SELECT pg_catalog.setval('@extschema@.epoch_raiser_seq', 0, TRUE);

COMMENT ON SEQUENCE @extschema@.epoch_raiser_seq IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: the transaction id (xid8) whose raise of the marks started the current epoch; 0: none known.';
