-- Pause a channel: from the commit on it delivers nothing (not even expired
-- locks) and keeps accepting messages; locked messages can still be
-- completed, deferred, failed and heartbeated.  It leaves the rotation:
-- next_at and wait_at go NULL, so producers leave no wake-ups for it.  Like
-- channel_set, it takes the channel row (waiting for consumers serving it)
-- and the channel guard exclusively (waiting for producers in flight and
-- for consumers taking from it as a busy channel), so no delivery from the
-- channel commits after the pause.  An unknown channel is created paused.
-- Returns false when the channel was already paused.
CREATE FUNCTION @extschema@.channel_pause(p_channel text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    v_channel := @extschema@._channel_lock(p_channel, @extschema@._clock_ms());
    IF v_channel.is_paused THEN
        RETURN FALSE;
    END IF;
    PERFORM @extschema@._channel_guard_exclusive(p_channel);
    UPDATE @extschema@.channel AS c
    SET
        is_paused = TRUE,
        next_at = NULL,
        turn = NULL,
        wait_at = NULL
    WHERE c.id = v_channel.id;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_pause(text) IS
'Pause a channel (created if unknown): it delivers nothing until channel_resume and keeps accepting messages. Returns false when it was already paused.';

REVOKE ALL ON FUNCTION @extschema@.channel_pause(text) FROM PUBLIC;
