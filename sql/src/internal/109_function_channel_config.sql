-- Internal: a channel's configuration: its row, or the defaults when it
-- has none.  One probe of channel_pkey.  SQL and STABLE: inlined into its
-- callers.
-- Parameters: p_channel_id (the hash), p_channel (the name).
-- Returns: a channel row (id NULL never: the defaults carry the hash).
-- Tables: reads channel.
CREATE FUNCTION @extschema@._channel_config(p_channel_id bigint, p_channel text)
RETURNS @extschema@.channel
LANGUAGE sql STABLE
AS $$
    SELECT COALESCE(
        (SELECT c FROM @extschema@.channel AS c WHERE c.id = p_channel_id AND c.name = p_channel),
        @extschema@._channel_defaults(p_channel, 0)
    )
$$;

COMMENT ON FUNCTION @extschema@._channel_config(bigint, text) IS
'Internal: a channel''s configuration, its row or the defaults.';

REVOKE ALL ON FUNCTION @extschema@._channel_config(bigint, text) FROM PUBLIC;
