-- Internal: admission of a channel with limits (max_concurrency,
-- release_interval_ms, a pause): account for admitted messages that ended
-- or no longer wait for their delivery, then admit held messages while the
-- channel has room, in (dequeue_at, id) order.  An admitted message becomes
-- ready (a place, _message_place) or, when its channel's release_at is
-- still ahead, scheduled at release_at (promotion places it then).  So the
-- take never sees a message its channel may not deliver, and a saturated
-- channel costs other channels nothing.  The take never runs this: a
-- delivery in a channel with a release interval leaves a wake at the
-- interval's end (_channel_release), whose promotion runs it.
-- Room: max_concurrency - num_admitted (admitted = ready, scheduled by the
-- interval, or locked; an expired lock stays admitted); with a
-- release_interval_ms, one admitted message not yet delivered at a time;
-- none while paused.
-- Locks the channel row (_channel_row_lock, waiting, then FOR NO KEY
-- UPDATE): admissions of one channel are serial, which keeps the counts
-- exact.  A channel without a row (no limits) is left alone; a pattern's
-- follower whose counts are back to nothing loses its row.
-- The walk of the held messages starts at the channel's admit_from: each
-- admission leaves a dead entry of message_held_ix at the front, which a
-- long-held snapshot keeps, and a walk from the channel's first entry
-- would read them all.  No held message of the channel has a dequeue_at
-- below admit_from: a caller that has just held one passes its dequeue_at
-- (p_held_at), and admit_from is lowered to it; after the walk, at READ
-- COMMITTED, it is raised to the first held message left (read without
-- SKIP LOCKED: one another call has locked counts), or to the last
-- admitted one's dequeue_at when none is left.  Every writer of a held
-- message holds the channel's row lock, as this does, so none is in
-- flight; a transaction snapshot, which may miss one that committed since,
-- never raises it (_channel_readmit, which holds messages of any
-- dequeue_at, sets it to the beginning).
-- A producer may also hold a message without the row lock: a create into a
-- channel its row shows full (_channel_hold_try), under the channel's hold
-- guard, shared until it commits.  So a walk with room first tries the
-- guard exclusively; without it (such a producer is in flight), or outside
-- READ COMMITTED, it raises no admit_from, keeps a pattern follower's row,
-- and leaves a wake for the room it did not fill: a message row whose
-- schedule is '', due 10 ms on, which a dequeue's promotion runs with the
-- guard (_message_promote).
-- Parameters: p_channel_id; p_ended, admitted messages that left the
--   channel or their admission (completed, cancelled, dead, failed,
--   deferred); p_pending_done, admitted messages that waited for their
--   delivery and no longer do (cancelled; an expired lock placed again
--   whose holder settled or renewed it); p_now, the clock;
--   p_held_at, the dequeue_at of the message the caller has just held
--   (NULL: none).
-- Returns: how many messages were admitted (0 when the channel has no row,
--   or its follower row was deleted).
-- Calls: _channel_row_lock, _epoch_enter, _message_place (inlined),
--   _channel_wake, _clock_ms (a wake's time).
-- Tables: reads channel (channel_pkey, backwards: newest version first),
--   message (message_held_ix, from admit_from; message_channel_ix, in a
--   channel whose takes claim, its placed unclaimed messages from the
--   position mark, at most its room), position_mark_seq (its last value);
--   writes message (the admitted ones, by message_pkey), channel (its
--   counts, release_at, admit_from and wake_id, by the ctid it was locked
--   at; or delete); a wake's through _channel_wake.
-- Locks: advisory (1819111683, hashint8(p_channel_id)) exclusive until the
--   transaction ends (_channel_row_lock: waits for its holder), then the
--   channel row FOR NO KEY UPDATE, which it updates or deletes; then the
--   epoch's parity (1819111690) shared until the transaction ends
--   (_epoch_enter), and the held messages it admits FOR UPDATE SKIP LOCKED
--   (one another call has locked is left held), which it updates.  With
--   room, the hold guard (1819111686, hashint8(p_channel_id)) tried
--   exclusively before the walk, until the transaction ends.
CREATE FUNCTION @extschema@._channel_admit(
    p_channel_id bigint,
    p_ended integer,
    p_pending_done integer,
    p_now bigint,
    p_held_at bigint
)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_channel record;
    v_room integer;
    v_admitted integer := 0;
    v_bound bigint;
    v_held record;
    v_is_guarded boolean;
    v_claims boolean;
    v_mark bigint;
BEGIN
    PERFORM @extschema@._channel_row_lock(p_channel_id);
    -- Newest version first, and written by the ctid it was locked at
    -- (_channel_row says why).
    SELECT c.ctid AS tid, c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id >= p_channel_id AND c.id <= p_channel_id
    ORDER BY c.id DESC
    LIMIT 1
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    v_channel.num_admitted := pg_catalog.int4larger(v_channel.num_admitted - p_ended, 0);
    v_channel.admit_from := LEAST(v_channel.admit_from, p_held_at);
    IF v_channel.release_interval_ms > 0 THEN
        v_channel.num_pending := pg_catalog.int4larger(v_channel.num_pending - p_pending_done, 0);
    END IF;
    -- (_channel_claims written out: v_channel is a record.)
    v_claims := v_channel.max_concurrency IS NOT NULL AND v_channel.release_interval_ms = 0
        AND NOT v_channel.is_paused AND NOT v_channel.is_ordered;
    -- A channel whose takes claim counts its locks: its room is what
    -- neither they nor its placed unclaimed messages (at most
    -- max_concurrency of them read) take up.
    v_room := CASE WHEN v_channel.is_paused THEN 0 ELSE LEAST(
        COALESCE(v_channel.max_concurrency - v_channel.num_admitted, 1000),
        CASE WHEN v_channel.release_interval_ms > 0 THEN 1 - v_channel.num_pending ELSE 1000 END
    ) END;
    IF v_claims AND v_room > 0 THEN
        -- (A variable: an index condition, where the sequence's volatile
        -- read would be a filter.)
        v_mark := pg_catalog.pg_sequence_last_value('@extschema@.position_mark_seq');
        v_room := v_room - (
            SELECT pg_catalog.count(*)::integer
            FROM (
                SELECT FROM @extschema@.message AS m
                WHERE
                    m.channel_id = v_channel.id AND NOT m.is_admitted
                    -- (From the position mark, where message_channel_ix's
                    -- live placed entries start: past its unplaced ones.)
                    AND m.position >= v_mark
                LIMIT v_room
            ) AS u
        );
    END IF;
    IF v_room > 0 THEN
        -- The hold guard, tried exclusively before the walk (a statement of
        -- its own, so that the walk's snapshot is taken after it): with it,
        -- every producer that held a message directly (_channel_hold_try)
        -- has committed, and the walk sees its message; without it (one is
        -- in flight), or outside READ COMMITTED, whose snapshot may be older,
        -- the walk may miss one: it then raises no admit_from, and leaves a
        -- wake for the room it could not fill (below).
        v_is_guarded := pg_catalog.current_setting('transaction_isolation') = 'read committed'
            AND pg_catalog.pg_try_advisory_xact_lock(1819111686, pg_catalog.hashint8(p_channel_id));
        v_bound := @extschema@._epoch_enter();
        FOR v_held IN
            SELECT m.id, m.dequeue_at
            FROM @extschema@.message AS m
            WHERE m.channel_id = v_channel.id AND m.is_held AND m.dequeue_at >= v_channel.admit_from
            ORDER BY m.dequeue_at, m.id
            LIMIT v_room
            FOR UPDATE SKIP LOCKED
        LOOP
            IF v_channel.release_at > p_now THEN
                -- (Never before its own dequeue_at: p_now may be a clock
                -- read before another backend's, which found it due.)
                UPDATE @extschema@.message AS m
                SET is_held = FALSE, is_admitted = TRUE, dequeue_at = GREATEST(v_channel.release_at, v_held.dequeue_at)
                WHERE m.id = v_held.id;
            ELSE
                -- (Released unclaimed when its take claims.)
                UPDATE @extschema@.message AS m
                SET
                    is_held = FALSE, is_admitted = NOT v_claims, is_limited = v_claims, position = p.place,
                    is_early = p.is_early
                FROM @extschema@._message_place(v_channel.id, v_bound, v_held.dequeue_at, 0) AS p
                WHERE m.id = v_held.id;
            END IF;
            v_admitted := v_admitted + 1;
        END LOOP;
        IF v_admitted > 0 AND v_is_guarded THEN
            v_channel.admit_from := COALESCE((
                SELECT m.dequeue_at FROM @extschema@.message AS m
                WHERE m.channel_id = v_channel.id AND m.is_held AND m.dequeue_at >= v_channel.admit_from
                ORDER BY m.dequeue_at, m.id LIMIT 1
            ), GREATEST(v_held.dequeue_at, v_channel.admit_from));
        END IF;
        -- A wake (_channel_wake), after a walk that may have missed a held
        -- message and had room left: a dequeue's promotion runs this walk
        -- again for it, once it has the guard (_message_promote).  One per
        -- channel: a pending one runs after this commits (its promotion
        -- needs the row lock, held here).
        IF NOT v_is_guarded AND v_admitted < v_room THEN
            v_channel.wake_id := @extschema@._channel_wake(v_channel.id, v_channel.name, v_channel.wake_id, @extschema@._clock_ms() + 10);
        END IF;
    END IF;
    -- A pattern's follower whose counts are back to nothing (nothing
    -- admitted, so nothing held either: it had room; its release passed)
    -- has nothing in its row that its pattern does not say: the row goes,
    -- and its next admission makes it again.  Not after a walk without the
    -- hold guard: a producer may be holding a message there, which needs
    -- the row (the wake left above deletes it later, with the guard).
    IF v_channel.pattern IS NOT NULL AND v_channel.num_admitted + v_admitted = 0 AND NOT v_channel.is_paused
        AND COALESCE(v_channel.release_at <= p_now, TRUE) AND v_is_guarded IS NOT FALSE THEN
        DELETE FROM @extschema@.channel AS c WHERE c.ctid = v_channel.tid;
        RETURN 0;
    END IF;
    UPDATE @extschema@.channel AS c
    SET
        num_admitted = v_channel.num_admitted + CASE WHEN v_claims THEN 0 ELSE v_admitted END,
        num_pending = v_channel.num_pending + CASE WHEN v_channel.release_interval_ms > 0 THEN v_admitted ELSE 0 END,
        release_at = v_channel.release_at,
        admit_from = v_channel.admit_from,
        wake_id = v_channel.wake_id
    WHERE c.ctid = v_channel.tid;
    RETURN v_admitted;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_admit(bigint, integer, integer, bigint, bigint) IS
'Internal: admission of a channel with limits: count admitted messages that ended or were delivered, then admit held ones while there is room.';

REVOKE ALL ON FUNCTION @extschema@._channel_admit(bigint, integer, integer, bigint, bigint) FROM PUBLIC;
