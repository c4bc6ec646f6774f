-- Internal: admission of a channel with limits (max_concurrency,
-- release_interval_ms, a pause): account for admitted messages that ended
-- or were delivered, then admit held messages while the channel has room,
-- in (dequeue_at, id) order.  An admitted message becomes ready (a place,
-- _message_place) or, when its channel's release_at is still ahead,
-- scheduled at release_at (promotion places it then).  So the take never
-- sees a message its channel may not deliver, and a saturated channel costs
-- other channels nothing.
-- Room: max_concurrency - num_admitted (admitted = ready, scheduled by the
-- interval, or locked; an expired lock stays admitted); with a
-- release_interval_ms, one admitted message not yet delivered at a time;
-- none while paused.
-- Locks the channel row (_channel_row_lock, waiting, then FOR NO KEY
-- UPDATE): admissions of one channel are serial, which keeps the counts
-- exact.  A channel without a row (no limits) is left alone; a pattern's
-- follower whose counts are back to nothing loses its row.
-- Parameters: p_channel_id; p_ended, admitted messages that left the
--   channel or their admission (completed, cancelled, dead, failed,
--   deferred); p_pending_done, admitted messages no longer waiting for
--   their delivery (taken, or cancelled before it); p_is_delivery, they
--   were taken (the release interval starts again); p_now, the clock.
-- Returns: how many messages were admitted.
-- Calls: _channel_row_lock, _epoch_enter, _message_place.
-- Tables: channel (update, delete), message (update of held messages).
CREATE FUNCTION @extschema@._channel_admit(
    p_channel_id bigint,
    p_ended integer,
    p_pending_done integer,
    p_is_delivery boolean,
    p_now bigint
)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
    v_room integer;
    v_admitted integer := 0;
    v_bound bigint;
    v_held record;
BEGIN
    PERFORM @extschema@._channel_row_lock(p_channel_id);
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = p_channel_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    v_channel.num_admitted := pg_catalog.int4larger(v_channel.num_admitted - p_ended, 0);
    IF v_channel.release_interval_ms > 0 THEN
        v_channel.num_pending := pg_catalog.int4larger(v_channel.num_pending - p_pending_done, 0);
        IF p_is_delivery THEN
            v_channel.release_at := p_now + v_channel.release_interval_ms;
        END IF;
    END IF;
    v_room := CASE WHEN v_channel.is_paused THEN 0 ELSE LEAST(
        COALESCE(v_channel.max_concurrency - v_channel.num_admitted, 1000),
        CASE WHEN v_channel.release_interval_ms > 0 THEN 1 - v_channel.num_pending ELSE 1000 END
    ) END;
    IF v_room > 0 THEN
        v_bound := @extschema@._epoch_enter();
        FOR v_held IN
            SELECT m.id, m.dequeue_at
            FROM @extschema@.message AS m
            WHERE m.channel_id = v_channel.id AND m.is_held
            ORDER BY m.dequeue_at, m.id
            LIMIT v_room
            FOR UPDATE SKIP LOCKED
        LOOP
            IF v_channel.release_at > p_now THEN
                UPDATE @extschema@.message AS m
                SET is_held = FALSE, is_admitted = TRUE, dequeue_at = v_channel.release_at
                WHERE m.id = v_held.id;
            ELSE
                UPDATE @extschema@.message AS m
                SET is_held = FALSE, is_admitted = TRUE, position = p.place, is_early = p.is_early
                FROM @extschema@._message_place(v_channel.id, v_bound, v_held.dequeue_at, 0) AS p
                WHERE m.id = v_held.id;
            END IF;
            v_admitted := v_admitted + 1;
        END LOOP;
    END IF;
    -- A pattern's follower whose counts are back to nothing (nothing
    -- admitted, so nothing held either: it had room; its release passed)
    -- has nothing in its row that its pattern does not say: the row goes,
    -- and its next admission makes it again.
    IF v_channel.pattern IS NOT NULL AND v_channel.num_admitted + v_admitted = 0 AND NOT v_channel.is_paused
        AND COALESCE(v_channel.release_at <= p_now, TRUE) THEN
        DELETE FROM @extschema@.channel AS c WHERE c.id = v_channel.id;
        RETURN 0;
    END IF;
    UPDATE @extschema@.channel AS c
    SET
        num_admitted = v_channel.num_admitted + v_admitted,
        num_pending = v_channel.num_pending + CASE WHEN v_channel.release_interval_ms > 0 THEN v_admitted ELSE 0 END,
        release_at = v_channel.release_at
    WHERE c.id = v_channel.id;
    RETURN v_admitted;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_admit(bigint, integer, integer, boolean, bigint) IS
'Internal: admission of a channel with limits: count admitted messages that ended or were delivered, then admit held ones while there is room.';

REVOKE ALL ON FUNCTION @extschema@._channel_admit(bigint, integer, integer, boolean, bigint) FROM PUBLIC;
