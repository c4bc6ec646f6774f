-- Internal: the configuration a channel without one of its own takes from
-- the pattern with the longest prefix of its name (_channel_follower): no
-- row when none matches.  One probe of channel_prefix_key: the greatest
-- prefix not after the name (byte order) is the longest matching one when
-- it is a prefix of the name at all; when it is not,
-- _channel_pattern_longest goes on (at most 255 probes, never on the hot
-- path).  With no pattern, the probe reads an empty index.  SQL, STABLE
-- and a table function: inlined into the FROM of the statement that calls
-- it (a Limit and an index scan; a scalar SQL function with a subquery is
-- not inlined, and each call of one is an executor start of its own).
-- Parameters: p_channel, the channel's name.
-- Returns: the follower's configuration as one channel row, or no row.
-- Calls: _channel_follower, _channel_pattern_longest.
-- Tables: reads channel (channel_prefix_key, backwards from the name).
-- Locks: none.
CREATE FUNCTION @extschema@._channel_pattern_config(p_channel text)
RETURNS SETOF @extschema@.channel
LANGUAGE sql STABLE
AS $$
    SELECT (f.f).*
    FROM (
        SELECT
            CASE
                WHEN pg_catalog.starts_with(p_channel COLLATE "C", p.prefix)
                    THEN @extschema@._channel_follower(p, p_channel)
                ELSE @extschema@._channel_pattern_longest(p_channel, p.prefix)
            END AS f
        FROM @extschema@.channel AS p
        WHERE p.prefix <= p_channel COLLATE "C" AND p.prefix IS NOT NULL
        ORDER BY p.prefix DESC
        LIMIT 1
    ) AS f
    WHERE (f.f).id IS NOT NULL
$$;

COMMENT ON FUNCTION @extschema@._channel_pattern_config(text) IS
'Internal: the configuration a channel without its own takes from its longest matching pattern; no row when none matches.';

REVOKE ALL ON FUNCTION @extschema@._channel_pattern_config(text) FROM PUBLIC;
