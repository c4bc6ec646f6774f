-- Schema changes from 0.6.0 to 0.7.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and re-applies the recorded
-- access grants, giving sql/lonnymq--0.6.0--0.7.0.sql.  Test:
-- test/python/test_upgrade.py (the upgraded schema equals a fresh one).

-- channel.floor_at: where a batch dequeue starts its walk of the channel's
-- messages; floor_checked_at: when it was last raised.  NULL for every
-- existing channel (no floor: walks start at the beginning, as in 0.6.0,
-- until a batch dequeue raises it).
ALTER TABLE @extschema@.channel
ADD COLUMN floor_at bigint,
ADD COLUMN floor_checked_at bigint;

-- @include sql/src/044_table_channel_floor_mark.sql
-- @include sql/src/045_index_channel_floor_mark_channel.sql
