-- Resume a paused channel: it rejoins the rotation at the back (now, or
-- after its release interval), and the next consumer to reach it decides
-- whether it has anything to deliver.  Returns false when the channel does
-- not exist or is not paused.  With notify on, a notification is sent.
CREATE FUNCTION @extschema@.channel_resume(p_channel text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.name = p_channel
    FOR UPDATE;
    IF NOT FOUND OR NOT v_channel.is_paused THEN
        RETURN FALSE;
    END IF;
    v_now := @extschema@._clock_ms();
    UPDATE @extschema@.channel AS c
    SET
        is_paused = FALSE,
        next_at = GREATEST(v_now, COALESCE(c.last_served_at + c.release_interval_ms, v_now)),
        turn = pg_catalog.nextval('@extschema@.channel_turn_seq'),
        wait_at = NULL
    WHERE c.id = v_channel.id;
    IF v_channel.notify THEN
        PERFORM pg_catalog.pg_notify('lonnymq', COALESCE(v_channel.notify_payload, p_channel));
    END IF;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_resume(text) IS
'Resume a paused channel: it rejoins the rotation at the back. Returns false when it does not exist or is not paused.';

REVOKE ALL ON FUNCTION @extschema@.channel_resume(text) FROM PUBLIC;
