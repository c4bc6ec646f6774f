-- The rotation: eligible channels in turn order.  Channels out of the
-- rotation (empty, waiting on a wake) are not in this index at all;
-- saturated and rate-limited channels sit at a future next_at, so the
-- dequeue probe "next_at <= now ORDER BY next_at, turn LIMIT 1" never walks
-- them.
CREATE INDEX channel_rotation_ix
ON @extschema@.channel (next_at, turn)
WHERE next_at IS NOT NULL;
