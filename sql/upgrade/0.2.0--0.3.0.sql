-- Schema changes from 0.2.0 to 0.3.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and re-applies the recorded
-- access grants, giving sql/lonnymq--0.2.0--0.3.0.sql.  Test:
-- test/python/test_upgrade.py (the upgraded schema equals a fresh one).

-- Four indexes get a predicate that is true of every row, so that the
-- planner can no longer use them for a lookup by id alone (see
-- sql/src/032_index_message_channel.sql).  Rebuilt under the extension
-- update's lock: on a large queue this takes as long as building them.
DROP INDEX @extschema@.message_channel_ix;
CREATE INDEX message_channel_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE channel_id IS NOT NULL;

DROP INDEX @extschema@.message_locked_ix;
CREATE INDEX message_locked_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE is_locked AND channel_id IS NOT NULL;

DROP INDEX @extschema@.channel_wake_due_ix;
CREATE INDEX channel_wake_due_ix
ON @extschema@.channel_wake (wake_at, id)
WHERE wake_at IS NOT NULL;

DROP INDEX @extschema@.dead_letter_channel_ix;
CREATE INDEX dead_letter_channel_ix
ON @extschema@.dead_letter (channel, id)
WHERE channel IS NOT NULL;
