-- Complete (delete) a locked message, presenting its fencing token.
-- Returns false, changing nothing, when the token is stale or the message is
-- not locked (deferred, already completed, purged).  For an unconstrained
-- channel the channel row is read, never locked or written.  A channel with
-- retain_history keeps a copy in message_history; a keyed message's key
-- stays claimed for the channel's dedup window.
--
-- Three statements in the common case: the message's channel (one
-- primary-key probe each), the DELETE, and the channel's counters
-- (_channel_release, which writes nothing for an unconstrained channel).
CREATE FUNCTION @extschema@.message_complete(
    p_id bigint,
    p_num_attempts integer
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
    v_gone record;
    v_key text;
    v_now bigint;
BEGIN
    IF p_id IS NULL OR p_num_attempts IS NULL THEN
        PERFORM @extschema@._check_token(p_id, p_num_attempts);
    END IF;
    v_channel := @extschema@._channel_of_message(p_id, TRUE, TRUE, FALSE);
    IF v_channel.id IS NULL THEN
        RETURN FALSE;
    END IF;
    v_now := @extschema@._clock_ms();
    IF v_channel.retain_history THEN
        DELETE FROM @extschema@.message AS m
        WHERE
            m.id = p_id
            AND m.num_attempts = p_num_attempts
            AND m.is_locked
            AND COALESCE(m.locked_by = @extschema@._caller_role(), TRUE)
        RETURNING m.* INTO v_gone;
        IF NOT FOUND THEN
            RETURN FALSE;
        END IF;
        v_key := v_gone.key;
        INSERT INTO @extschema@.message_history (
            id, channel, key, content, state, num_attempts, created_at, completed_at
        )
        VALUES (
            v_gone.id, v_channel.name, v_gone.key, v_gone.content, v_gone.state,
            v_gone.num_attempts, v_gone.created_at, v_now
        );
    ELSE
        DELETE FROM @extschema@.message AS m
        WHERE
            m.id = p_id
            AND m.num_attempts = p_num_attempts
            AND m.is_locked
            AND COALESCE(m.locked_by = @extschema@._caller_role(), TRUE)
        RETURNING m.key INTO v_key;
        IF NOT FOUND THEN
            RETURN FALSE;
        END IF;
    END IF;
    -- After the DELETE, even for a channel that had no limits at the
    -- lookup, so that a limit that channel_set committed meanwhile (it
    -- waits for this message's row lock) is seen, and counted.
    PERFORM @extschema@._channel_release(v_channel.id, 1, TRUE, v_now);
    IF v_key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(
            v_channel.id, v_key, p_id, v_channel.dedup_window_ms, v_now
        );
    END IF;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_complete(bigint, integer) IS
'Complete a locked message: deletes it (keeping a copy in message_history when the channel retains history). Returns false (nothing changed) when p_num_attempts is not the current fencing token or the message is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_complete(bigint, integer) FROM PUBLIC;
