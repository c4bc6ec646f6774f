-- Internal: the id of a channel's newest raise row in channel_floor (NULL:
-- never raised).  The rows from it on make the floor (_channel_scan_from)
-- and are what the next raise supersedes (_channel_place): one definition
-- for both.  Read newest first, so never through the rows earlier raises
-- deleted.
CREATE FUNCTION @extschema@._channel_floor_last_raise(p_channel_id bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN (
        SELECT r.id
        FROM @extschema@.channel_floor AS r
        WHERE r.channel_id = p_channel_id AND r.is_raise
        ORDER BY r.id DESC
        LIMIT 1
    );
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_floor_last_raise(bigint) IS
'Internal: the id of a channel''s newest floor raise row (NULL: never raised).';

REVOKE ALL ON FUNCTION @extschema@._channel_floor_last_raise(bigint) FROM PUBLIC;
