-- Release a locked message for a later delivery, keeping its attempt count (a
-- defer is not a failure: num_failures and the attempt log are left alone).
-- NULL p_dequeue_at means now (the wall clock); NULL p_state keeps the saved
-- state.  Returns false, changing nothing, for a stale token, a message that
-- is not locked, is locked by another role or does not exist.  Lock order, as
-- everywhere: the channel row (of a channel that admits or has max_size,
-- _message_channel), then the message row.  The message goes back to its
-- channel through _message_requeue (ready, scheduled, or held for admission).
-- Parameters: p_id, the message; p_num_attempts, its fencing token;
--   p_dequeue_at, when it may be delivered again (NULL: now); p_state, state
--   to save, at most _max_content_bytes (NULL: keep).
-- Returns: whether the message was deferred.
-- Calls: _check_token, _max_content_bytes, _check_size, _message_channel,
--   _epoch_enter, _clock_ms, _caller_role (inlined), _message_requeue.
-- Tables: reads message (message_pkey, locked FOR UPDATE).  (channel through
--   _message_channel; message written through _message_requeue.)
-- Locks: the channel guard (1819111681, or its bucket guard 1819111682) shared
--   and, for a channel that admits or has max_size, the channel row lock
--   (1819111683) exclusive, both until the transaction ends
--   (_message_channel); the epoch's parity (1819111690) shared until the
--   transaction ends (_epoch_enter); the message's row FOR UPDATE (waits for a
--   concurrent complete or fail of it), then updated; _message_requeue's.
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
    v_bound bigint;
    v_now bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_is_admitted boolean;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    IF pg_catalog.octet_length(p_state) > @extschema@._max_content_bytes() THEN
        PERFORM @extschema@._check_size('p_state', pg_catalog.octet_length(p_state), @extschema@._max_content_bytes());
    END IF;
    v_channel := @extschema@._message_channel(p_id);
    IF v_channel.id IS NULL THEN
        RETURN FALSE;
    END IF;
    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();

    SELECT m.is_admitted INTO v_is_admitted
    FROM @extschema@.message AS m
    WHERE
        m.id = p_id
        AND m.num_attempts = p_num_attempts
        AND m.is_locked
        AND COALESCE(m.locked_by = @extschema@._caller_role(), TRUE)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    PERFORM @extschema@._message_requeue(
        p_id, v_channel, v_is_admitted, COALESCE(p_dequeue_at, v_now), p_state, FALSE, NULL, v_bound, v_now
    );
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_defer(bigint, integer, bigint, bytea) IS
'Unlock a locked message and schedule it again at p_dequeue_at (NULL: now), optionally saving p_state (NULL keeps the saved state). Returns false (nothing changed) for a stale token or a message that is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_defer(bigint, integer, bigint, bytea) FROM PUBLIC;
