-- Internal: the one decision of where a channel that message_dequeue
-- visited goes next, and the one write of its row (see _channel_visit for
-- what the dequeue read and got).  A channel without limits that was alone
-- is not locked: serving it leaves it first in the rotation.
--
-- The places:
--   * at max_concurrency: eligible again at its first lock's expiry (or
--     when a complete frees a place: _channel_release);
--   * nothing deliverable left, and no producer in flight (the channel
--     guard held exclusively; then a fresh probe sees every message put in
--     it, and every later producer sees wait_at and leaves a wake-up): out
--     of the rotation when empty, else waiting for its first message;
--   * else the back of the rotation, after its release interval.
-- Only in READ COMMITTED is a channel put to sleep or its floor raised:
-- both need a statement snapshot taken after the guard.
--
-- A channel without limits that was alone is not written (it would stay
-- first): any number of consumers take from it at once, as from a plain
-- SKIP LOCKED table, and its row gets no new version per serve.  Nor is
-- one that another consumer moved since this one read it (its turn
-- changed, or that consumer holds the row): that consumer's write already
-- put it where it goes.
--
-- The floor (channel_floor): when the first message taken lies more than
-- 20 ms past it (see v_raise) and the guard is held, it rises to the first
-- message still visible, but never above the clock less 20 ms (a producer
-- whose message sorts below the floor lowers it: _channel_arrival).
CREATE FUNCTION @extschema@._channel_place(
    p_visit @extschema@._channel_visit,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel := p_visit.channel;
    v_locked integer := v_channel.num_locked;
    v_next bigint := p_now;
    v_wait bigint;
    v_head bigint;
    v_floor bigint;
    v_raise boolean := FALSE;
    v_exclusive boolean := FALSE;
    v_may_sleep boolean := FALSE;
    v_moves boolean;
BEGIN
    IF p_visit.num_taken > 0 THEN
        v_next := p_now + v_channel.release_interval_ms;
        -- The floor is behind: both the first message taken and the clock
        -- 20 ms back are more than 20 ms past it (so the walks of a channel
        -- whose consumers keep up start at most about 40 ms of messages
        -- behind its head, which under a long-open snapshot is what each
        -- walk reads; at most 50 raises a second); or the first message
        -- taken was below it (an expired lock).
        v_raise := pg_catalog.int8smaller(p_visit.first_at, p_now - 20) > p_visit.floor_at + 20 OR p_visit.first_at < p_visit.floor_at;
    END IF;
    IF v_channel.max_concurrency IS NOT NULL THEN
        v_locked := pg_catalog.int4larger(v_locked + p_visit.num_fresh - p_visit.num_dead, 0);
    END IF;

    IF v_locked >= v_channel.max_concurrency THEN
        SELECT m.dequeue_at INTO v_head
        FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel.id AND m.is_locked AND m.is_counted
        ORDER BY m.dequeue_at, m.id
        LIMIT 1;
        -- No lock at all although the count says full: the count is wrong;
        -- repair it rather than stall.
        v_locked := CASE WHEN v_head IS NULL THEN 0 ELSE v_locked END;
        v_next := GREATEST(v_next, v_head);
    ELSE
        -- Is anything deliverable left?  The probe walks from the floor,
        -- over the entries of the messages this call just took from the
        -- channel: so it asks only when that is at most one, or when the
        -- take came up short (it walked as far itself).  A channel that
        -- filled a larger share is left to its next visit, which finds out.
        v_may_sleep := (p_visit.num_taken <= 1 OR p_visit.came_short) AND (p_visit.num_taken = 0 OR p_visit.is_held);
    END IF;

    -- The probe: the channel's first message, not SKIP LOCKED (a message
    -- another transaction holds right now, and may roll back, keeps the
    -- channel in the rotation).  When it says the channel may sleep, or
    -- the floor is to be raised, it runs again after the guard is taken
    -- exclusively: that snapshot sees every message put in the channel,
    -- with the floor it lowered (read again), and decides both.
    FOR v_probe IN 1..2 LOOP
        IF v_may_sleep OR v_exclusive THEN
            SELECT m.dequeue_at INTO v_head
            FROM @extschema@.message AS m
            WHERE
                m.channel_id = v_channel.id
                AND m.dequeue_at >= CASE
                    WHEN v_exclusive OR p_visit.floor_at IS NULL THEN @extschema@._channel_scan_from(v_channel.id)
                    ELSE p_visit.floor_at
                END
            ORDER BY m.dequeue_at, m.id
            LIMIT 1;
        END IF;
        IF v_exclusive THEN
            IF v_may_sleep AND NOT v_head <= p_now IS TRUE THEN
                v_wait := COALESCE(v_head, 9223372036854775807);
                v_next := GREATEST(v_next, v_head);
            END IF;
            IF v_raise THEN
                -- The new floor supersedes every row from the last raise on
                -- (no producer is in flight to add one meanwhile).
                v_floor := pg_catalog.int8smaller(p_now - 20, COALESCE(v_head, p_now - 20));
                DELETE FROM @extschema@.channel_floor AS f
                WHERE
                    f.channel_id = v_channel.id
                    AND f.id >= COALESCE(@extschema@._channel_floor_last_raise(v_channel.id), 0);
                INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
                VALUES (v_channel.id, v_floor, TRUE);
            END IF;
            EXIT;
        END IF;
        EXIT WHEN NOT (v_raise OR v_may_sleep AND NOT v_head <= p_now IS TRUE);
        v_exclusive := pg_catalog.current_setting('transaction_isolation') = 'read committed'
            AND @extschema@._channel_guard_try_exclusive(v_channel.name);
        EXIT WHEN NOT v_exclusive;
    END LOOP;

    IF NOT p_visit.is_held AND v_wait IS NULL AND p_visit.num_dead = 0 THEN
        RETURN;
    END IF;

    -- A channel this call holds, or puts to sleep, goes to its new place;
    -- any other keeps its place: only its counts are written.
    v_moves := p_visit.is_held OR v_wait IS NOT NULL;
    UPDATE @extschema@.channel AS c
    SET
        next_at = CASE
            WHEN NOT v_moves THEN c.next_at
            WHEN v_wait = 9223372036854775807 THEN NULL
            ELSE v_next
        END,
        turn = CASE
            WHEN NOT v_moves THEN c.turn
            WHEN v_wait = 9223372036854775807 THEN NULL
            ELSE pg_catalog.nextval('@extschema@.channel_turn_seq')
        END,
        wait_at = CASE WHEN v_moves THEN v_wait ELSE c.wait_at END,
        last_served_at = CASE WHEN v_moves AND p_visit.num_taken > 0 THEN p_now ELSE c.last_served_at END,
        num_locked = v_locked,
        num_removed = c.num_removed + CASE WHEN c.max_size IS NULL THEN 0 ELSE p_visit.num_dead END
    -- Not held: unless another consumer has moved it since, or holds it
    -- (it is placing it).  Removals are counted in any case: then it waits.
    WHERE
        c.id = v_channel.id
        AND (
            p_visit.is_held OR p_visit.num_dead > 0
            OR c.id = (
                SELECT o.id
                FROM @extschema@.channel AS o
                WHERE o.id = v_channel.id AND o.turn IS NOT DISTINCT FROM v_channel.turn
                FOR NO KEY UPDATE SKIP LOCKED
            )
        );
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_place(@extschema@._channel_visit, bigint) IS
'Internal: decide and write where a channel visited by message_dequeue goes next: the back of the rotation, waiting for a lock''s expiry, asleep, or (alone and without limits) where it is.';

REVOKE ALL ON FUNCTION @extschema@._channel_place(@extschema@._channel_visit, bigint) FROM PUBLIC;
