-- Delivery order within a channel: (dequeue_at, id).  Serves the ready probe
-- "channel_id = c AND dequeue_at <= now ORDER BY dequeue_at, id LIMIT n",
-- the head probe, and lock recovery.
CREATE INDEX message_channel_ix
ON @extschema@.message (channel_id, dequeue_at, id);
