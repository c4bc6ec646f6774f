-- Internal: validates a channel or pattern name argument: not NULL
-- (22004), 1 to 255 characters (22023).
-- Parameters: p_channel, the name.
-- Returns: nothing; raises on an invalid name.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_channel_name(p_channel text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_channel IS NULL THEN
        RAISE EXCEPTION 'lonnymq: channel name must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.length(p_channel) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'lonnymq: channel name must be 1 to 255 characters, got %',
            pg_catalog.length(p_channel)
            USING ERRCODE = '22023';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_channel_name(text) IS
'Internal: raises 22004 for a NULL channel name, 22023 for an empty or over-long one.';

REVOKE ALL ON FUNCTION @extschema@._check_channel_name(text) FROM PUBLIC;
