-- Due wake-ups in time order.
CREATE INDEX channel_wake_due_ix
ON @extschema@.channel_wake (wake_at, id);
