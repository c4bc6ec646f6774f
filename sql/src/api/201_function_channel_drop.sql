-- Drop a channel.  Refuses (55006) while it holds messages unless p_purge,
-- which deletes them, locked ones included (their workers' tokens then go
-- stale), and its deduplication keys.  Its dead letters and history are
-- kept (they are filed by channel name), and so are schedules producing into
-- it: the next period creates the channel again.  Waits for producers and
-- consumers in flight on the channel.
CREATE FUNCTION @extschema@.channel_drop(
    p_channel text,
    p_purge boolean DEFAULT FALSE
)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channel_id bigint;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    IF p_purge IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_purge must not be NULL'
            USING ERRCODE = '22004';
    END IF;

    v_channel_id := @extschema@._channel_id(p_channel);
    PERFORM @extschema@._channel_guard_exclusive(p_channel);
    PERFORM @extschema@._channel_row_lock(v_channel_id);
    -- A channel exists while it has a row (configuration) or messages.
    PERFORM 1
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id AND c.name = p_channel
    FOR UPDATE;
    IF NOT FOUND AND NOT EXISTS (
        SELECT 1 FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel_id AND m.channel = p_channel
    ) THEN
        RETURN FALSE;
    END IF;

    IF NOT p_purge AND EXISTS (
        SELECT 1 FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel_id AND m.channel = p_channel
    ) THEN
        RAISE EXCEPTION 'lonnymq: channel "%" still holds messages', p_channel
            USING ERRCODE = '55006',
            HINT = 'Pass p_purge => true to delete them with the channel.';
    END IF;

    DELETE FROM @extschema@.message AS m WHERE m.channel_id = v_channel_id AND m.channel = p_channel;
    DELETE FROM @extschema@.message_key AS k WHERE k.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel_quota AS q WHERE q.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel AS c WHERE c.id = v_channel_id;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_drop(text, boolean) IS
'Drop a channel and its settings. Returns false when it does not exist; raises 55006 while it holds messages unless p_purge is true.';

REVOKE ALL ON FUNCTION @extschema@.channel_drop(text, boolean) FROM PUBLIC;
