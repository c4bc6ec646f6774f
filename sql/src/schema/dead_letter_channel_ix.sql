-- Dead letters of one channel, in the order they were created as messages:
-- dead_letter_redrive(p_channel) and the channel_stats count.
--
-- The predicate is true of every row (the column is NOT NULL); it is there
-- for the planner: the index can serve only a query that constrains its
-- leading column, never a lookup by id alone.  Without it a generic plan
-- made while the table looked empty (a drained, vacuumed queue: zero
-- tuples estimated) could pick this index for "id = $1", on a par with the
-- primary key, and then scan the whole index on every call once the queue
-- has grown.
CREATE INDEX dead_letter_channel_ix
ON @extschema@.dead_letter (channel, id)
WHERE channel IS NOT NULL;
