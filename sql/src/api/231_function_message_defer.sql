-- Release a locked message for a later delivery (retry), keeping its
-- attempt count.  NULL p_dequeue_at means now (the wall clock); NULL p_state
-- keeps the saved state.
CREATE FUNCTION @extschema@.message_defer(
    p_id bigint,
    p_num_attempts integer,
    p_dequeue_at bigint DEFAULT NULL,
    p_state bytea DEFAULT NULL
)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_dequeue_at bigint;
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    IF pg_catalog.octet_length(p_state) > @extschema@._max_content_bytes() THEN
        PERFORM @extschema@._check_size('p_state', pg_catalog.octet_length(p_state), @extschema@._max_content_bytes());
    END IF;
    v_now := @extschema@._clock_ms();
    v_dequeue_at := COALESCE(p_dequeue_at, v_now);

    v_channel := @extschema@._channel_of_message(p_id, TRUE, FALSE, TRUE);
    IF v_channel.id IS NULL THEN
        RETURN FALSE;
    END IF;

    UPDATE @extschema@.message AS m
    SET
        is_locked = FALSE,
        dequeue_at = v_dequeue_at,
        state = COALESCE(p_state, m.state)
    WHERE
        m.id = p_id
        AND m.num_attempts = p_num_attempts
        AND m.is_locked
        AND COALESCE(m.locked_by = @extschema@._caller_role(), TRUE);
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;

    PERFORM @extschema@._channel_release(ARRAY[v_channel.id], FALSE, v_now);
    -- Like a producer: the message may now be deliverable before the time a
    -- waiting channel will next be looked at, or below its floor.
    PERFORM @extschema@._channel_arrival(v_channel, v_dequeue_at, v_now);
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_defer(bigint, integer, bigint, bytea) IS
'Unlock a locked message and schedule it again at p_dequeue_at (NULL: now), optionally saving p_state (NULL keeps the saved state). Returns false (nothing changed) for a stale token or a message that is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_defer(bigint, integer, bigint, bytea) FROM PUBLIC;
