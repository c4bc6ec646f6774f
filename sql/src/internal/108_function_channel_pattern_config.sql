-- Internal: the configuration a channel without one of its own takes from
-- the pattern with the longest prefix of its name, or NULL when none
-- matches.  One probe of channel_prefix_key: the greatest prefix not
-- after the name (byte order) is the longest matching one when it is a
-- prefix of the name at all; when it is not, _channel_pattern_longest
-- goes on (at most 255 probes).  With no pattern, the probe reads an empty
-- index.  SQL and STABLE: inlined into its callers, two plan nodes.
-- Tables: reads channel (channel_prefix_key).
CREATE FUNCTION @extschema@._channel_pattern_config(p_channel text)
RETURNS @extschema@.channel
LANGUAGE sql STABLE
AS $$
    SELECT (
        SELECT
            CASE
                WHEN pg_catalog.starts_with(p_channel COLLATE "C", p.prefix)
                    THEN @extschema@._channel_follower(p, p_channel)
                ELSE @extschema@._channel_pattern_longest(p_channel, p.prefix)
            END
        FROM @extschema@.channel AS p
        WHERE p.prefix <= p_channel COLLATE "C" AND p.prefix IS NOT NULL
        ORDER BY p.prefix DESC
        LIMIT 1
    )
$$;

COMMENT ON FUNCTION @extschema@._channel_pattern_config(text) IS
'Internal: the configuration a channel without its own takes from its longest matching pattern; NULL when none matches.';

REVOKE ALL ON FUNCTION @extschema@._channel_pattern_config(text) FROM PUBLIC;
