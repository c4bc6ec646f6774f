-- Schema changes from 0.7.0 to 0.8.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and re-applies the recorded
-- access grants, giving sql/lonnymq--0.7.0--0.8.0.sql.  Test:
-- test/python/test_upgrade.py (the upgraded schema equals a fresh one).

-- The dequeue is one path: its general way, the floor raise and the
-- nothing-ready decision are merged into message_dequeue and
-- _channel_place; _message_take takes the channel row.
DROP FUNCTION @extschema@._message_dequeue_general(bigint, integer, text, bigint, boolean);
DROP FUNCTION @extschema@._channel_nothing_ready(@extschema@.channel, bigint);
DROP FUNCTION @extschema@._channel_floor_raise(bigint, bigint);
DROP FUNCTION @extschema@._message_take(
    bigint, bigint, bigint, integer, boolean, integer, boolean, text, bigint, boolean
);

-- The floor is raised when it is behind, not on a once-a-second cadence.
ALTER TABLE @extschema@.channel DROP COLUMN floor_checked_at;
