-- Patterns by their prefix, in byte order ("C"): a channel's pattern is the
-- longest prefix of its name, found from the greatest prefix not after the
-- name (_channel_pattern_config).  Only patterns' rows: a few entries.
CREATE UNIQUE INDEX channel_prefix_key
ON @extschema@.channel (prefix)
WHERE prefix IS NOT NULL;
