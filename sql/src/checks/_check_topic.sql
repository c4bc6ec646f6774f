-- Internal: validates a routing key or a topic pattern (p_name names the
-- parameter in the message): not NULL (22004), 1 to 255 characters (22023).
-- Parameters: p_topic, the routing key or pattern; p_name, the parameter's
--   name for the error message.
-- Returns: nothing; raises on an invalid value.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_topic(p_topic text, p_name text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_topic IS NULL THEN
        RAISE EXCEPTION 'lonnymq: % must not be NULL', p_name
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.length(p_topic) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'lonnymq: % must be 1 to 255 characters, got %', p_name, pg_catalog.length(p_topic)
            USING ERRCODE = '22023';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_topic(text, text) IS
'Internal: raises 22004 for a NULL routing key or topic pattern, 22023 for an empty or over-long one.';

REVOKE ALL ON FUNCTION @extschema@._check_topic(text, text) FROM PUBLIC;
