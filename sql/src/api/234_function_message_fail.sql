-- Report a failed attempt of a locked message and apply its channel's retry
-- policy: 'retry' (unlocked and scheduled again after the backoff,
-- _backoff_ms) while this is not its max_attempts-th failure (failed
-- deliveries: fail calls and expired locks, not defers: message.num_failures),
-- else 'dead' (moved to dead_letter with p_error and its attempt log).  Returns
-- NULL, changing nothing, for a stale token or a message that is not
-- locked.  Every failure is logged in the message's attempt_log.  Lock
-- order, as everywhere: the channel row (a limited channel's counters), the
-- channel guard (held shared, as a producer: the retry must not be missed
-- by a consumer declaring the channel idle), then the message row.
CREATE FUNCTION @extschema@.message_fail(
    p_id bigint,
    p_num_attempts integer,
    p_error text DEFAULT NULL
)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_dequeue_at bigint;
    v_failures integer;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    PERFORM @extschema@._check_size('p_error', pg_catalog.octet_length(p_error), 1048576);
    v_channel := @extschema@._channel_of_message(p_id, TRUE, TRUE, TRUE);
    IF v_channel.id IS NULL THEN
        RETURN NULL;
    END IF;
    v_now := @extschema@._clock_ms();

    -- This failure is the message's v_failures-th (defers do not count).
    SELECT m.num_failures + 1 INTO v_failures
    FROM @extschema@.message AS m
    WHERE
        m.id = p_id
        AND m.num_attempts = p_num_attempts
        AND m.is_locked
        AND COALESCE(m.locked_by = @extschema@._caller_role(), TRUE)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    IF v_failures >= v_channel.max_attempts THEN
        PERFORM @extschema@._message_bury(
            p_id, v_channel.id, v_channel.name, p_error, v_now, v_channel.dedup_window_ms
        );
        PERFORM @extschema@._channel_release(ARRAY[v_channel.id], TRUE, v_now);
        RETURN 'dead';
    END IF;

    v_dequeue_at := v_now + @extschema@._backoff_ms(v_channel, v_failures);
    UPDATE @extschema@.message AS m
    SET
        is_locked = FALSE,
        dequeue_at = v_dequeue_at,
        num_failures = v_failures,
        attempt_log = @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, v_now, p_error)
    WHERE m.id = p_id;
    PERFORM @extschema@._channel_release(ARRAY[v_channel.id], FALSE, v_now);
    PERFORM @extschema@._channel_arrival(v_channel, v_dequeue_at, v_now);
    RETURN 'retry';
END;
$$;

COMMENT ON FUNCTION @extschema@.message_fail(bigint, integer, text) IS
'Report a failed attempt of a locked message: ''retry'' (scheduled again after the channel''s backoff) or ''dead'' (moved to dead_letter once it has had max_attempts deliveries). Returns NULL (nothing changed) for a stale token or a message that is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_fail(bigint, integer, text) FROM PUBLIC;
