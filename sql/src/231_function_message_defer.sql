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
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_dequeue_at bigint;
    v_channel_id bigint;
    v_wait_at bigint;
    v_constrained boolean;
    v_name text;
    v_notify boolean;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    IF pg_catalog.octet_length(p_state) > 16777216 THEN
        RAISE EXCEPTION 'lonnymq: p_state is % bytes, the limit is 16777216 (16 MiB)',
            pg_catalog.octet_length(p_state)
            USING ERRCODE = '54000';
    END IF;
    v_now := @extschema@._clock_ms();
    v_dequeue_at := COALESCE(p_dequeue_at, v_now);

    SELECT m.channel_id INTO v_channel_id
    FROM @extschema@.message AS m
    WHERE m.id = p_id;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    SELECT c.name, c.max_concurrency IS NOT NULL INTO v_name, v_constrained
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id;
    -- Lock order, as everywhere: the channel row, then the channel guard,
    -- then the message row.  A channel with max_concurrency is locked for
    -- its counter; the guard is held shared, like a producer's, so that no
    -- consumer declares the channel empty or waiting while this message's
    -- new time is invisible to it.
    IF v_constrained THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel_id
        FOR NO KEY UPDATE;
    END IF;
    PERFORM @extschema@._channel_guard_shared(v_name);
    SELECT c.wait_at, c.notify AND NOT c.is_paused INTO v_wait_at, v_notify
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id;

    UPDATE @extschema@.message AS m
    SET
        is_locked = FALSE,
        dequeue_at = v_dequeue_at,
        state = COALESCE(p_state, m.state)
    WHERE
        m.id = p_id
        AND m.num_attempts = p_num_attempts
        AND m.is_locked;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;

    PERFORM @extschema@._channel_release(v_channel_id, 1, FALSE, v_now);
    -- Like a producer: the message may now be deliverable before the time a
    -- waiting channel will next be looked at.
    PERFORM @extschema@._channel_wake(
        v_channel_id, v_wait_at, GREATEST(v_dequeue_at, v_now)
    );
    -- A new time below the channel's floor: the floor goes down to it.
    PERFORM @extschema@._channel_floor_lower(v_channel_id, v_dequeue_at);
    IF v_notify AND v_dequeue_at <= v_now THEN
        PERFORM pg_catalog.pg_notify('lonnymq', v_name);
    END IF;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_defer(bigint, integer, bigint, bytea) IS
'Unlock a locked message and schedule it again at p_dequeue_at (NULL: now), optionally saving p_state (NULL keeps the saved state). Returns false (nothing changed) for a stale token or a message that is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_defer(bigint, integer, bigint, bytea) FROM PUBLIC;
