-- Counted locks by expiry, per channel: the locked messages of channels
-- with max_concurrency (see message.is_counted).  Used only for channels at
-- their max_concurrency: they may deliver nothing but their own expired
-- locks, and this index finds those without walking the channel's ready
-- backlog.  Locks in channels without that limit are not in it, which saves
-- every dequeue from them an index entry.
--
-- The predicate is true of every row (the column is NOT NULL); it is there
-- for the planner: the index can serve only a query that constrains its
-- leading column, never a lookup by id alone.  Without it a generic plan
-- made while the table looked empty (a drained, vacuumed queue: zero
-- tuples estimated) could pick this index for "id = $1", on a par with the
-- primary key, and then scan the whole index on every call once the queue
-- has grown.
CREATE INDEX message_locked_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE is_locked AND is_counted AND channel_id IS NOT NULL;
