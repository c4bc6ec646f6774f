-- Internal: a channel's configuration: its row, else its pattern's
-- (_channel_pattern_config), else the defaults.  One probe of channel_pkey,
-- and for a channel without a row one of channel_prefix_key.  SQL and
-- STABLE, but not inlined (a scalar SQL function with a subquery never
-- is): a call is an executor start of its own; the hot paths
-- (message_create, completions) read the row and the pattern in their
-- own statements instead.
-- Parameters: p_channel_id, the channel's id (_channel_id); p_channel,
--   its name.
-- Returns: a channel row (id NULL never: the defaults carry the hash; their
--   created_at is 0).
-- Calls: _channel_row, _channel_pattern_config, _channel_defaults.
-- Tables: reads nothing directly (channel, through _channel_row and
--   _channel_pattern_config).
-- Locks: none.
CREATE FUNCTION @extschema@._channel_config(p_channel_id bigint, p_channel text)
RETURNS @extschema@.channel
LANGUAGE sql STABLE
AS $$
    SELECT COALESCE(
        (SELECT c FROM @extschema@._channel_row(p_channel_id, p_channel) AS c),
        (SELECT f FROM @extschema@._channel_pattern_config(p_channel) AS f),
        @extschema@._channel_defaults(p_channel, 0)
    )
$$;

COMMENT ON FUNCTION @extschema@._channel_config(bigint, text) IS
'Internal: a channel''s configuration: its row, else its pattern''s, else the defaults.';

REVOKE ALL ON FUNCTION @extschema@._channel_config(bigint, text) FROM PUBLIC;
