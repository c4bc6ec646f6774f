-- Messages held by their channel's limit, in the order the channel
-- delivers them: admission takes the first when the channel has room.
CREATE INDEX message_held_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE is_held;
