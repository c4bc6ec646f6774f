-- Delivery order within a channel: (dequeue_at, id).  Serves the ready probe
-- "channel_id = c AND dequeue_at <= now ORDER BY dequeue_at, id LIMIT n",
-- the head probe, and lock recovery.
--
-- The predicate is true of every row (the column is NOT NULL); it is there
-- for the planner: the index can serve only a query that constrains its
-- leading column, never a lookup by id alone.  Without it a generic plan
-- made while the table looked empty (a drained, vacuumed queue: zero
-- tuples estimated) could pick this index for "id = $1", on a par with the
-- primary key, and then scan the whole index on every call once the queue
-- has grown.
CREATE INDEX message_channel_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE channel_id IS NOT NULL;
