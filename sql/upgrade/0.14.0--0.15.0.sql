-- Schema changes from 0.14.0 to 0.15.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.14.0
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.14.0--0.15.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- The message's states are checked (schema/message.sql): a held message is
-- neither ready nor admitted, and only a ready message is early.  Before
-- 0.15.0, message_heartbeat took an early expired lock back out of the
-- round order without clearing is_early: such rows are cleared first.  The
-- constraints read the whole table once, under the upgrade's lock.
UPDATE @extschema@.message SET is_early = FALSE WHERE is_early AND position IS NULL;
ALTER TABLE @extschema@.message
ADD CONSTRAINT message_held_is_not_ready CHECK (NOT (is_held AND position IS NOT NULL)),
ADD CONSTRAINT message_held_is_not_admitted CHECK (NOT (is_held AND is_admitted)),
ADD CONSTRAINT message_early_is_ready CHECK (NOT is_early OR position IS NOT NULL);

-- Early messages are ready ones: the index needs no test of the position.
DROP INDEX @extschema@.message_early_ix;
-- @include sql/src/schema/message_early_ix.sql
