-- A channel's marks: the one probe a batch dequeue makes to know whether its
-- channel's floor_at holds.
CREATE INDEX channel_floor_mark_channel_ix
ON @extschema@.channel_floor_mark (channel_id);
