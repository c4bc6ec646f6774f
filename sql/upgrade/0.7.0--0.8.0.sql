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

-- The floor moves from channel.floor_at and channel_floor_mark to
-- channel_floor, an insert-only log read newest row first: a raise row per
-- floor, and a lowering to the beginning for each channel with marks.
DROP FUNCTION @extschema@._channel_floor_mark(bigint, bigint, bigint);
-- @include sql/src/044_sequence_channel_floor_id.sql
-- @include sql/src/045_table_channel_floor.sql
-- @include sql/src/046_index_channel_floor_channel.sql
INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
SELECT c.id, c.floor_at, TRUE
FROM @extschema@.channel AS c
WHERE c.floor_at IS NOT NULL
ORDER BY c.id;
INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
SELECT DISTINCT k.channel_id, -9223372036854775808, FALSE
FROM @extschema@.channel_floor_mark AS k;
ALTER EXTENSION lonnymq DROP TABLE @extschema@.channel_floor_mark;
DROP TABLE @extschema@.channel_floor_mark;
ALTER TABLE @extschema@.channel DROP COLUMN floor_at;

-- message_dequeue keeps what it read and got of each channel it visits, and
-- each message it takes, as one value each (after the changes to channel
-- above: _channel_visit holds its row type).
-- @include sql/src/069_type_channel_visit.sql
-- @include sql/src/070_type_delivery.sql

-- What a producer owes a channel's consumers (a wake-up, the floor, a
-- notification) is one function, _channel_arrival.
DROP FUNCTION @extschema@._channel_wake(bigint, bigint, bigint);

-- _schedule_run returns how many messages it created, nothing else.
DROP FUNCTION @extschema@._schedule_run(bigint, integer, OUT integer, OUT integer);
