-- Schema changes from 0.14.0 to 0.15.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.14.0
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.14.0--0.15.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- Only a ready message is early (schema/message.sql).  Before 0.15.0,
-- message_heartbeat took an early expired lock back out of the round order
-- without clearing is_early: such rows are cleared.  (message_early_ix tests
-- the position, so they were never taken for early ones.)
UPDATE @extschema@.message SET is_early = FALSE WHERE is_early AND position IS NULL;
