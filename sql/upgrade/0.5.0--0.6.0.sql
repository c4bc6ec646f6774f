-- Schema changes from 0.5.0 to 0.6.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and re-applies the recorded
-- access grants, giving sql/lonnymq--0.5.0--0.6.0.sql.  Test:
-- test/python/test_upgrade.py (the upgraded schema equals a fresh one).

-- message.is_counted: only the locks of channels with max_concurrency are
-- counted, and only those stay in message_locked_ix.  Existing locks of
-- such channels are counted here; the index is rebuilt under the extension
-- update's lock (it holds locked messages only: quick).
ALTER TABLE @extschema@.message
ADD COLUMN is_counted boolean NOT NULL DEFAULT FALSE;

UPDATE @extschema@.message AS m
SET is_counted = TRUE
FROM @extschema@.channel AS c
WHERE
    c.id = m.channel_id
    AND c.max_concurrency IS NOT NULL
    AND m.is_locked;

DROP INDEX @extschema@.message_locked_ix;
-- @include sql/src/033_index_message_locked.sql

-- _message_take takes whether the channel counts its locks.
DROP FUNCTION @extschema@._message_take(
    bigint, bigint, bigint, integer, boolean, integer, boolean, text, bigint
);

-- channel_stats counts locks in its one pass over message_channel_ix (they
-- are no longer all in message_locked_ix).  Same columns: replaced in place,
-- its grants kept.
-- @include sql/src/068_view_channel_stats.sql
