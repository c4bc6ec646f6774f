-- Schema changes from 0.13.0 to 0.13.1 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.13.0
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.13.0--0.13.1.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- A raise at REPEATABLE READ or SERIALIZABLE (_marks_raise): the raiser of
-- the current epoch and the previous epoch's bound and start.  0 (before
-- every position and every entry of message_due_ix): the first raise after the upgrade leaves the marks where
-- they are and records them.
CREATE SEQUENCE @extschema@.epoch_previous_bound_seq AS bigint MINVALUE 0 START 0;
SELECT pg_catalog.setval('@extschema@.epoch_previous_bound_seq', 0, TRUE);
SELECT pg_catalog.pg_extension_config_dump('@extschema@.epoch_previous_bound_seq', '');
CREATE SEQUENCE @extschema@.epoch_previous_at_seq AS bigint
MINVALUE -9223372036854775808 START 0;
SELECT pg_catalog.setval('@extschema@.epoch_previous_at_seq', 0, TRUE);
SELECT pg_catalog.pg_extension_config_dump('@extschema@.epoch_previous_at_seq', '');
CREATE SEQUENCE @extschema@.epoch_raiser_seq AS bigint MINVALUE 0 START 0;
SELECT pg_catalog.setval('@extschema@.epoch_raiser_seq', 0, TRUE);

-- to_epoch is in every access set (the monitor set too, from the recorded
-- grants applied again below), and no longer PUBLIC's.
REVOKE ALL ON FUNCTION @extschema@.to_epoch(timestamptz) FROM PUBLIC;

-- Schedules under a held snapshot (the schedule table's comment): no
-- unique index, the names serialised by schedule_set, the delivery's
-- probes from the due mark on greatest(next_at, set_at).
ALTER TABLE @extschema@.schedule DROP CONSTRAINT schedule_pkey;
CREATE INDEX schedule_name_ix ON @extschema@.schedule (name);
CREATE SEQUENCE @extschema@.schedule_changer_seq AS bigint MINVALUE 0 START 0;
SELECT pg_catalog.setval('@extschema@.schedule_changer_seq', 0, TRUE);
DROP FUNCTION @extschema@._schedule_run(bigint, integer);
-- 0.13.0's raise did not stop the due mark at a schedule: one due now may
-- have its next_at below the mark.  Its set_at is this clock, in the
-- epoch (as schedule_set writes it); the others' is their created_at.
ALTER TABLE @extschema@.schedule ADD COLUMN set_at bigint;
SELECT @extschema@._epoch_enter();
UPDATE @extschema@.schedule AS s
SET set_at = CASE
    WHEN s.next_at < pg_catalog.pg_sequence_last_value('@extschema@.due_mark_seq') THEN @extschema@._clock_ms()
    ELSE s.created_at
END;
ALTER TABLE @extschema@.schedule ALTER COLUMN set_at SET NOT NULL;
DROP INDEX @extschema@.schedule_due_ix;
CREATE INDEX schedule_due_ix ON @extschema@.schedule ((greatest(next_at, set_at)));

-- Channel rows under a held snapshot (_channel_row, _channel_admit): the
-- walk of a channel's held messages starts at its admit_from.  From the
-- beginning at first: its next admission raises it.
ALTER TABLE @extschema@.channel ADD COLUMN admit_from bigint NOT NULL DEFAULT -9223372036854775808;
DROP FUNCTION @extschema@._channel_admit(bigint, integer, integer, boolean, bigint);

-- Whether a channel's row was ever made (channel_row_seq's comment): 1
-- when the channel table has any row, so that completions follow them.
CREATE SEQUENCE @extschema@.channel_row_seq AS bigint MINVALUE 0 MAXVALUE 1 START 0;
SELECT pg_catalog.setval(
    '@extschema@.channel_row_seq', CASE WHEN EXISTS (SELECT 1 FROM @extschema@.channel) THEN 1 ELSE 0 END, TRUE
);
SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_row_seq', '');
