-- A channel's early messages (message.is_early), in (dequeue_at, id) order:
-- every take looks here for its turns' channels (one probe, which finds
-- nothing unless the channel has a priority message, a long transaction's
-- or a recovered lock waiting), and delivers those that sort before the
-- turns' holders.  Small: only messages more than a second out of order.
-- Only ready messages are early (schema/message.sql), but the database does
-- not enforce it: the position test keeps a stray flag on a message that is
-- not ready from giving it a turn.
-- The position, last (0.15.0): every probe also asks for a place at or
-- above the position mark, where every ready message lies (a condition of
-- the index scan, checked on the entry).  An early message that was taken
-- leaves its entry at its old key, dead, and a long-held snapshot keeps
-- it; the probes start at the channel's least key, so without that test
-- each one read the heap of every such entry (a retry every 10 messages
-- into a backlogged channel: 360 of them, 3.5 times a worker call's
-- buffers, after 3,000 calls under a held snapshot).  With it, only those
-- whose old place the mark has not yet passed (bounded by the channel's
-- backlog in rounds) cost a heap read; the others cost their entry.
CREATE INDEX message_early_ix
ON @extschema@.message (channel_id, dequeue_at, id, position)
WHERE is_early AND position IS NOT NULL;
