-- Internal: the slow path of _channel_pattern_config, when the greatest
-- prefix not after the name, p_missed, is not a prefix of it.  The longest
-- prefix of the name among the patterns is then a prefix of the part the
-- name shares with p_missed (anything longer would sort after p_missed and
-- not after the name): each of those lengths is probed once, at most 255.
-- A function of its own, not inlined: its plan is made and run only when
-- the first probe missed, never on the hot path.
-- Parameters: p_channel, the channel's name; p_missed, the prefix the first
--   probe found.
-- Returns: the follower's configuration (_channel_follower), or NULL.
-- Calls: _channel_follower.
-- Tables: reads channel (channel_prefix_key, one probe per length).
-- Locks: none.
CREATE FUNCTION @extschema@._channel_pattern_longest(p_channel text, p_missed text)
RETURNS @extschema@.channel
LANGUAGE sql STABLE
AS $$
    SELECT @extschema@._channel_follower(q, p_channel)
    FROM @extschema@.channel AS q
    WHERE q.prefix IS NOT NULL AND q.prefix = ANY(ARRAY(
        SELECT pg_catalog.left(p_channel COLLATE "C", k)
        FROM pg_catalog.generate_series(0, pg_catalog.length(p_missed) - 1) AS k
        WHERE pg_catalog.left(p_missed COLLATE "C", k) = pg_catalog.left(p_channel COLLATE "C", k)
    ))
    ORDER BY q.prefix DESC
    LIMIT 1
$$;

COMMENT ON FUNCTION @extschema@._channel_pattern_longest(text, text) IS
'Internal: the longest pattern prefix of a channel name when the first probe of _channel_pattern_config missed; at most one probe per character.';

REVOKE ALL ON FUNCTION @extschema@._channel_pattern_longest(text, text) FROM PUBLIC;
