-- Internal: a channel's limits or pause changed (channel_set,
-- channel_pause, channel_resume): its messages are admitted again under the
-- new configuration p_channel (already stored, its row locked by the
-- caller).  Every ready message is held (a paused channel delivers
-- nothing, a limited one only what it admits); the locks are what is
-- admitted (live or expired, ready or held again: each goes back to the
-- due index at its expiry, where the next promotion recovers an expired
-- one); then a channel with limits admits its held messages while it
-- has room (_channel_admit), and one without places them all, in
-- (dequeue_at, id) order (_message_place).  The channel's counts are
-- recounted (num_admitted: its locks, when it has limits; num_pending: 0)
-- and its admit_from set to the beginning.  Costs the channel's messages,
-- once: an administrative call.
-- Parameters: p_channel, the channel's new row; p_bound, the epoch's bound
--   (the caller entered the epoch); p_now, the caller's clock.
-- Returns: nothing (void).
-- Calls: _channel_admits, _channel_claims, _channel_admit, _message_place (inlined),
--   _channel_wake, _clock_ms (a wake, outside READ COMMITTED).
-- Tables: reads message (message_channel_ix: the channel's messages;
--   message_held_ix: its held ones); writes message (the channel's ready,
--   admitted and locked messages; the held ones it places), channel (its
--   counts and admit_from; outside READ COMMITTED, the wake_id of the wake
--   it leaves through _channel_wake).
-- Locks: the channel's messages it updates (waits for a take or completion
--   in flight).  The caller holds the channel guard exclusively and the
--   channel row lock (1819111683) with its row FOR UPDATE; _channel_admit's
--   are then its own again: the row lock is held already, the channel row
--   FOR NO KEY UPDATE, the held messages FOR UPDATE SKIP LOCKED.
CREATE FUNCTION @extschema@._channel_readmit(
    p_channel @extschema@.channel,
    p_bound bigint,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_limited boolean := @extschema@._channel_admits(p_channel);
    v_held record;
BEGIN
    UPDATE @extschema@.message AS m
    SET
        position = NULL,
        is_early = FALSE,
        is_held = NOT m.is_locked AND (m.is_held OR m.position IS NOT NULL),
        -- (A lock that was ready or held again re-enters the due index
        -- above the due mark, which may have passed its expiry.)
        dequeue_at = CASE
            WHEN m.is_locked AND (m.is_held OR m.position IS NOT NULL) THEN GREATEST(m.dequeue_at, p_now)
            ELSE m.dequeue_at
        END,
        is_admitted = v_limited AND m.is_locked,
        -- (Claims count locks: a lock holds one.)
        is_limited = @extschema@._channel_claims(p_channel)
    WHERE m.channel_id = p_channel.id AND m.channel = p_channel.name
        AND (m.position IS NOT NULL OR m.is_admitted OR m.is_locked AND (v_limited OR m.is_held));
    UPDATE @extschema@.channel AS c
    SET
        num_admitted = CASE WHEN v_limited THEN (
            SELECT pg_catalog.count(*)::integer
            FROM @extschema@.message AS m
            WHERE m.channel_id = p_channel.id AND m.channel = p_channel.name AND m.is_admitted
        ) ELSE 0 END,
        num_pending = 0,
        -- (Messages of any dequeue_at are held again: the walk starts at
        -- the beginning, _channel_admit.)
        admit_from = -9223372036854775808
    WHERE c.id = p_channel.id;
    IF v_limited THEN
        PERFORM @extschema@._channel_admit(p_channel.id, 0, 0, p_now, NULL);
        RETURN;
    END IF;
    FOR v_held IN
        SELECT m.id, m.dequeue_at
        FROM @extschema@.message AS m
        WHERE m.channel_id = p_channel.id AND m.is_held
        ORDER BY m.dequeue_at, m.id
    LOOP
        UPDATE @extschema@.message AS m
        SET is_held = FALSE, is_limited = FALSE, position = p.place, is_early = p.is_early
        FROM @extschema@._message_place(p_channel.id, p_bound, v_held.dequeue_at, 0) AS p
        WHERE m.id = v_held.id;
    END LOOP;
    -- Outside READ COMMITTED the snapshot may predate a producer that held
    -- its message at create (_channel_hold_try) and that this call waited
    -- for on the channel guard: a wake walks the channel again, at READ
    -- COMMITTED (_message_promote, _channel_admit), and places it.
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        UPDATE @extschema@.channel AS c
        SET wake_id = @extschema@._channel_wake(c.id, c.name, c.wake_id, @extschema@._clock_ms() + 10)
        WHERE c.id = p_channel.id;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_readmit(@extschema@.channel, bigint, bigint) IS
'Internal: admit a channel''s messages again after its limits or pause changed.';

REVOKE ALL ON FUNCTION @extschema@._channel_readmit(@extschema@.channel, bigint, bigint) FROM PUBLIC;
