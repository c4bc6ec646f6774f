-- A channel's floor rows, read newest first (backwards).
CREATE INDEX channel_floor_channel_ix
ON @extschema@.channel_floor (channel_id, id);
