-- The transaction (xid8, as bigint) of the last schedule_set that inserted
-- a schedule; 0: none known.  schedule_set holds the advisory lock
-- (1819111684, 0) until it ends, so the value's transaction has ended when
-- the next one reads it.  At REPEATABLE READ or SERIALIZABLE a schedule_set
-- that finds no row by the name inserts one only when that transaction had
-- ended before its snapshot (else 40001): a name inserted since would be
-- invisible to it, and there is no unique index to refuse a second row (see
-- the schedule table).  Not registered for pg_dump, as epoch_raiser_seq:
-- a transaction id means nothing in another cluster, and 0 is safe after a
-- restore.
CREATE SEQUENCE @extschema@.schedule_changer_seq AS bigint MINVALUE 0 START 0;

-- Called, so that pg_sequence_last_value reads it.
SELECT pg_catalog.setval('@extschema@.schedule_changer_seq', 0, TRUE);

COMMENT ON SEQUENCE @extschema@.schedule_changer_seq IS
'Schedules, internal state maintained by schedule_set, not to be written by hand: the transaction id (xid8) of the last schedule_set that inserted a schedule; 0: none known.';
