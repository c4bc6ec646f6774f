-- Internal: a locked message goes back to its channel for a later attempt:
-- message_fail's retry (p_is_failure: its failure counted in num_failures and
-- logged with p_error) and message_defer (p_state saved unless NULL).  It is
-- unlocked and, by its new time p_dequeue_at and its channel:
--   scheduled  p_dequeue_at ahead of p_now: message_due_ix promotes it;
--   held       its channel has a limit or is paused: admission;
--   ready      otherwise: its channel's next place (_message_place).
-- An admitted message leaves its admission (a lock counts towards
-- max_concurrency until it is completed, failed or deferred): the channel
-- admits its next held message, which may be this one.  Except in an ordered
-- channel: there it keeps its admission, placed at once when its new time (not
-- before the channel's release_at) has come and the channel is not paused,
-- else left due (promotion places an admitted message, or holds it in a paused
-- channel), so nothing else of the channel is admitted before it is completed,
-- dead-lettered or cancelled.  A message ready now in a channel with notify
-- sends NOTIFY lonnymq.  The caller has locked the message, entered the epoch
-- (p_bound) and read its clock after.
-- Parameters: p_id, the message; p_channel, its channel's configuration
--   (_message_channel); p_is_admitted, whether it holds an admission;
--   p_dequeue_at, its new time; p_state, the state to save (NULL: keep);
--   p_is_failure, a failure rather than a defer; p_error, the failure's error;
--   p_bound, the caller's epoch bound (_epoch_enter); p_now, the caller's
--   clock, read after it entered the epoch.
-- Returns: nothing.
-- Calls: _channel_claims, _channel_promotes (inlined), _message_place (inlined),
--   _attempt_log_append (inlined), _channel_admit.
-- Tables: reads message (message_pkey: whether an admitted message was made
--   ready again, its channel's pending delivery; _message_place's probes of
--   message_ready_ix and message_channel_ix); writes message (the message, by
--   message_pkey).
-- Locks: the message row it updates (the caller holds it FOR UPDATE); when the
--   message leaves its admission or is held, _channel_admit's: the channel row
--   lock (1819111683, already held through _message_channel), the channel's
--   row FOR NO KEY UPDATE, held messages FOR UPDATE SKIP LOCKED, the epoch's
--   parity (1819111690) shared.
CREATE FUNCTION @extschema@._message_requeue(
    p_id bigint,
    p_channel @extschema@.channel,
    p_is_admitted boolean,
    p_dequeue_at bigint,
    p_state bytea,
    p_is_failure boolean,
    p_error text,
    p_bound bigint,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    -- (A channel whose takes claim places it: its next take claims.)
    v_claims boolean := @extschema@._channel_claims(p_channel);
    v_limited boolean := @extschema@._channel_promotes(p_channel);
    v_keeps boolean := p_is_admitted AND p_channel.is_ordered;
    -- (A kept admission waits for its channel's release, as every
    -- delivery of a channel with a release interval does.)
    v_dequeue_at bigint := CASE
        WHEN v_keeps THEN GREATEST(p_dequeue_at, COALESCE(p_channel.release_at, p_dequeue_at))
        ELSE p_dequeue_at
    END;
    v_position bigint;
    v_is_early boolean := FALSE;
    v_pending integer;
BEGIN
    -- (An expired lock made ready again is its channel's pending delivery.)
    IF p_is_admitted THEN
        SELECT (m.position IS NOT NULL)::integer INTO v_pending FROM @extschema@.message AS m WHERE m.id = p_id;
    END IF;
    -- (A paused channel's kept message is left due: promotion holds it.)
    IF v_dequeue_at <= p_now AND (NOT v_limited OR v_keeps AND NOT p_channel.is_paused) THEN
        SELECT p.place, p.is_early INTO v_position, v_is_early
        FROM @extschema@._message_place(p_channel.id, p_bound, v_dequeue_at, 0) AS p;
    END IF;
    UPDATE @extschema@.message AS m
    SET
        is_locked = FALSE,
        dequeue_at = v_dequeue_at,
        state = COALESCE(p_state, m.state),
        num_failures = m.num_failures + CASE WHEN p_is_failure THEN 1 ELSE 0 END,
        attempt_log = CASE
            WHEN p_is_failure THEN @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, p_now, p_error)
            ELSE m.attempt_log
        END,
        is_admitted = v_keeps,
        is_limited = v_claims,
        position = v_position,
        is_early = v_is_early,
        is_held = v_dequeue_at <= p_now AND v_limited AND NOT v_keeps
    WHERE m.id = p_id;
    IF NOT v_keeps AND (p_is_admitted OR v_dequeue_at <= p_now AND v_limited) THEN
        -- (p_held_at: the message is held, under its channel's row lock,
        -- _message_channel's.)
        PERFORM @extschema@._channel_admit(
            p_channel.id, CASE WHEN p_is_admitted THEN 1 ELSE 0 END, COALESCE(v_pending, 0), p_now,
            CASE WHEN v_dequeue_at <= p_now AND v_limited THEN v_dequeue_at END
        );
    END IF;
    IF p_channel.notify AND v_dequeue_at <= p_now AND NOT p_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', COALESCE(p_channel.notify_payload, p_channel.name));
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_requeue(
    bigint, @extschema@.channel, boolean, bigint, bytea, boolean, text, bigint, bigint
) IS
'Internal: unlock a message for a later attempt (a failure''s retry, a defer): ready, scheduled or held for admission.';

REVOKE ALL ON FUNCTION @extschema@._message_requeue(
    bigint, @extschema@.channel, boolean, bigint, bytea, boolean, text, bigint, bigint
) FROM PUBLIC;
