-- The rows of a pattern's followers (channels with admission counts under
-- a pattern's limits), which a change of the pattern updates.  Only
-- followers' rows.
CREATE INDEX channel_pattern_ix
ON @extschema@.channel (pattern)
WHERE pattern IS NOT NULL;
