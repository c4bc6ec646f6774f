-- Report a failed attempt of a locked message and apply its channel's retry
-- policy: 'retry' (unlocked and delivered again after the backoff,
-- _backoff_ms) while this is not its max_attempts-th failure (failed
-- deliveries: fail calls and expired locks, not defers: message.num_failures),
-- else 'dead' (moved to dead_letter with p_error and its attempt log,
-- _message_bury; an admitted message's channel then admits its next).  Returns
-- NULL, changing nothing, for a stale token, a message that is not locked, is
-- locked by another role or does not exist.  Every failure is logged in the
-- message's attempt_log and counted in lonnymq_messages_failed_total.  Lock
-- order, as everywhere: the channel row (of a channel that admits or has
-- max_size, _message_channel), then the message row.  The retry goes back to
-- its channel through _message_requeue (a backoff of 0: ready now).
-- Parameters: p_id, the message; p_num_attempts, its fencing token; p_error,
--   the error to log (at most 1 MiB; NULL allowed).
-- Returns: 'retry', 'dead', or NULL (nothing changed).
-- Calls: _check_token, _check_size, _message_channel, _epoch_enter, _clock_ms,
--   _caller_role (inlined), _message_bury, _channel_admit, _backoff_ms,
--   _message_requeue, _max_error_bytes (a constant).
-- Tables: reads message (message_pkey, locked FOR UPDATE); writes
--   messages_failed_seq (the counter).  (channel through _message_channel;
--   message, dead_letter, message_key and channel written through
--   _message_bury, _channel_admit and _message_requeue.)
-- Locks: the channel guard (1819111681, or its bucket guard 1819111682) shared
--   and, for a channel that admits or has max_size, the channel row lock
--   (1819111683) exclusive, both until the transaction ends
--   (_message_channel); the epoch's parity (1819111690) shared until the
--   transaction ends (_epoch_enter); the message's row FOR UPDATE (waits for a
--   concurrent complete or defer of it), then updated or deleted;
--   _message_bury's, _channel_admit's and _message_requeue's.
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
    v_bound bigint;
    v_now bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_message record;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    PERFORM @extschema@._check_size('p_error', pg_catalog.octet_length(p_error), @extschema@._max_error_bytes());
    v_channel := @extschema@._message_channel(p_id);
    IF v_channel.id IS NULL THEN
        RETURN NULL;
    END IF;
    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();

    SELECT
        m.num_failures + 1 AS num_failures, m.is_admitted, (m.position IS NOT NULL)::integer AS pending,
        -- (Counted, lonnymq_messages_failed_total: a sequence, no row.)
        pg_catalog.nextval('@extschema@.messages_failed_seq') AS counted
    INTO v_message
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

    IF v_message.num_failures >= v_channel.max_attempts THEN
        PERFORM @extschema@._message_bury(
            p_id, v_channel.id, v_channel.name, p_error, v_now, v_channel.dedup_window_ms
        );
        IF v_message.is_admitted THEN
            PERFORM @extschema@._channel_admit(v_channel.id, 1, v_message.pending, v_now, NULL);
        END IF;
        RETURN 'dead';
    END IF;

    PERFORM @extschema@._message_requeue(
        p_id, v_channel, v_message.is_admitted,
        v_now + @extschema@._backoff_ms(v_channel, v_message.num_failures),
        NULL, TRUE, p_error, v_bound, v_now
    );
    RETURN 'retry';
END;
$$;

COMMENT ON FUNCTION @extschema@.message_fail(bigint, integer, text) IS
'Report a failed attempt of a locked message: ''retry'' (scheduled again after the channel''s backoff) or ''dead'' (moved to dead_letter once it has had max_attempts deliveries). Returns NULL (nothing changed) for a stale token or a message that is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_fail(bigint, integer, text) FROM PUBLIC;
