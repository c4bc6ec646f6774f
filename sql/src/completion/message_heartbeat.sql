-- Extend a locked message's lock to at least now + p_lock_ms.  Never shortens
-- a lock.  Returns false, changing nothing, for a stale token, a message that
-- is not locked or is locked by another role.  A writer of message_due_ix (the
-- lock's expiry): it enters the epoch first, then reads the clock.  A lock
-- that had expired and was promoted (placed again, still locked: its holder may
-- complete it until it is delivered again) is taken back out of the round
-- order (position NULL, and so not early): its holder keeps it.  When that
-- message was admitted, it was its channel's pending delivery: the channel's
-- row lock is taken before the message row, as completions take them, and its
-- admission runs (_channel_admit), which may admit another.
-- Parameters: p_id, the message; p_num_attempts, its fencing token; p_lock_ms,
--   the lock's new least length from now (1 ms to _max_duration_ms,
--   _check_lock_ms).
-- Returns: whether the lock was extended.
-- Calls: _check_token, _check_lock_ms, _epoch_enter, _channel_row_lock,
--   _caller_role (inlined), _clock_ms, _channel_admit.
-- Tables: reads channel (channel_pkey: the channel of an admitted lock made
--   placed again), message (message_pkey); writes message (dequeue_at,
--   position).
-- Locks: the epoch's parity (1819111690) shared until the transaction ends
--   (_epoch_enter); for an admitted lock placed again, advisory
--   (1819111683, hashint8(channel id)) exclusive until the transaction ends
--   (_channel_row_lock), before the message row; the message's row FOR UPDATE,
--   then updated; for that admitted one, _channel_admit's (its channel's row
--   FOR NO KEY UPDATE, held messages FOR UPDATE SKIP LOCKED).
CREATE FUNCTION @extschema@.message_heartbeat(
    p_id bigint,
    p_num_attempts integer,
    p_lock_ms bigint
)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_renewed record;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    PERFORM @extschema@._check_lock_ms(p_lock_ms);
    -- A writer of message_due_ix: the epoch first, then the clock.  A lock
    -- that had expired and was promoted (placed again) is taken back out of
    -- the round order: its holder keeps it.
    PERFORM @extschema@._epoch_enter();
    -- (Channel rows before message rows, as completions lock them: the row
    -- of the channel of a lock placed again, which may be its pending
    -- delivery.)
    -- (The message by primary key only: a condition on its position let a
    -- plan made on an empty queue walk message_ready_ix.)
    PERFORM @extschema@._channel_row_lock(c.id)
    FROM @extschema@.channel AS c
    WHERE c.id = (
        SELECT CASE WHEN m.position IS NOT NULL AND m.is_admitted THEN m.channel_id END
        FROM @extschema@.message AS m
        WHERE m.id = p_id
    );
    WITH old AS (
        SELECT m.id, m.position IS NOT NULL AND m.is_admitted AS was_pending
        FROM @extschema@.message AS m
        WHERE
            m.id = p_id AND m.num_attempts = p_num_attempts AND m.is_locked
            AND COALESCE(m.locked_by = @extschema@._caller_role(), TRUE)
        FOR UPDATE
    )
    UPDATE @extschema@.message AS m
    SET dequeue_at = GREATEST(m.dequeue_at, @extschema@._clock_ms() + p_lock_ms), position = NULL, is_early = FALSE
    FROM old AS o
    WHERE m.id = o.id
    RETURNING m.channel_id, o.was_pending INTO v_renewed;
    -- (Such a lock of a channel with a release interval was its pending
    -- delivery: the channel may admit another.)
    IF v_renewed.was_pending THEN
        PERFORM @extschema@._channel_admit(v_renewed.channel_id, 0, 1, @extschema@._clock_ms(), NULL);
    END IF;
    RETURN v_renewed IS NOT NULL;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_heartbeat(bigint, integer, bigint) IS
'Extend the lock of a locked message to at least now + p_lock_ms (never shortens it). Returns false for a stale token or a message that is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_heartbeat(bigint, integer, bigint) FROM PUBLIC;
