-- Wake-ups of one channel: lets a producer see that an earlier wake-up is
-- already pending (one row per idle channel, not one per message).
CREATE INDEX channel_wake_channel_ix
ON @extschema@.channel_wake (channel_id, wake_at);
