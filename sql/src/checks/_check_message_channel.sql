-- Internal: validates the channel a message goes to: a channel name
-- (_check_channel_name) that does not end in '*', which names a pattern
-- (channel_set), never a channel.
-- Parameters: p_channel, the channel's name.
-- Returns: nothing; raises 22004 or 22023 on an invalid name or a pattern.
-- Calls: _check_channel_name.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_message_channel(p_channel text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    IF pg_catalog.right(p_channel, 1) = '*' THEN
        RAISE EXCEPTION 'lonnymq: "%" is a pattern (a name ending in *), not a channel: a message goes to a channel',
            p_channel
            USING ERRCODE = '22023';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_message_channel(text) IS
'Internal: raises 22004 for a NULL channel name, 22023 for an empty or over-long one or for a pattern (a name ending in *).';

REVOKE ALL ON FUNCTION @extschema@._check_message_channel(text) FROM PUBLIC;
