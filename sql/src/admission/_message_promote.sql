-- Internal: promote up to p_limit messages of message_due_ix whose time has
-- come (from the due mark, oldest first, SKIP LOCKED), for a dequeue or
-- tick(); the one path of scheduled messages, periodic messages, retries,
-- defers, a limited channel's new messages and lock recovery:
--   * a release row: the next dependents of an ended message are
--     resolved (_message_release_run, which waits at most 10 ms for a
--     lock);
--   * a schedule's pending occurrence: it becomes the schedule's message of
--     its boundary, and the following occurrence is created
--     (_schedule_next); then it goes on as any scheduled message below (or
--     is left due, when its schedule's row is busy);
--   * an expired lock that is its message's max_attempts-th failure: a dead
--     letter ("lock expired", _message_bury);
--   * a message of a paused channel, or of a channel with limits that is
--     not admitted (a producer's new message among them): held, and its
--     channel's admission runs (_channel_admit); a channel that follows a
--     pattern with limits gets its row (its admission counts) here;
--   * an expired lock of an admitted message in a channel with a release
--     interval, while the channel's release is ahead or another delivery
--     is pending: due again when the interval ends;
--   * any other: ready, at its channel's next place (_message_place).  An
--     expired lock stays locked while placed: its holder may still complete
--     it until it is delivered again (is_recovered then); in a channel with
--     limits it stays admitted, so max_concurrency counts it until then;
--     with a release interval its new delivery waits for the channel's
--     release, as the channel's one pending delivery.
-- A message whose channel's configuration is changing right now (its
-- channel guard is held exclusively), or whose channel row another call
-- holds when its promotion writes that row, is left due for a later call:
-- a promotion never waits.  Every expired lock found is counted
-- (lonnymq_messages_lock_expired_total).
-- Parameters: p_now, the caller's clock; p_due_mark, where the walk of
--   message_due_ix starts (the due mark; tick() passes the beginning);
--   p_bound, the epoch's bound (the caller entered the epoch); p_limit, at
--   most how many due messages it takes.
-- Returns: how many periodic messages it made (tick() reports it).
-- Calls: _channel_guard_try_shared, _clock_ms (a wake's next try),
--   _message_release_run (a release row),
--   _channel_config, _schedule_next,
--   _channel_promotes, _channel_claims, _channel_row_try_lock, _message_bury, _message_place
--   (inlined), _channel_admit, _due_taken_note (the first row's key: a raise
--   later in the transaction must not pass it).
-- Tables: reads message (message_due_ix, from p_due_mark to p_now), channel
--   (channel_pkey, backwards: a release's pending count);
--   writes message (held, rescheduled or placed, by message_pkey), channel
--   (a follower's new row; num_pending), messages_lock_expired_seq
--   (nextval) (the channel's configuration read by _channel_config;
--   message, dead_letter, message_key and channel written by _message_bury
--   and _channel_admit; schedule, message and channel_quota by
--   _schedule_next).
-- Locks: the due messages FOR UPDATE SKIP LOCKED, which it updates (or
--   _message_bury deletes); the channel guard (1819111681, or from a
--   transaction's 33rd guard its bucket guard 1819111682) tried shared
--   (_channel_guard_try_shared), and, when its promotion writes the
--   channel row, the channel row lock (1819111683) tried
--   (_channel_row_try_lock), both until the transaction ends; then
--   _schedule_next's, which only tries (a schedule's row and a max_size
--   channel's quota row FOR UPDATE SKIP LOCKED); _channel_admit's, whose
--   row lock is held already: the channel row FOR NO KEY UPDATE, held
--   messages FOR UPDATE SKIP LOCKED.  For a wake: the channel row lock
--   (1819111683), then the hold guard (1819111686, hashint8(channel id))
--   exclusive, both tried, until the transaction ends.  For a release row:
--   _message_release_run's (buckets, then waiting messages, FOR NO KEY
--   UPDATE; a dependent's channel guard, row lock and row, to end it), each
--   waited for at most 10 ms.
CREATE FUNCTION @extschema@._message_promote(
    p_now bigint,
    p_due_mark bigint,
    p_bound bigint,
    p_limit integer
)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_due record;
    v_channel @extschema@.channel%ROWTYPE;
    v_is_dead boolean;
    v_is_held boolean;
    v_noted boolean := FALSE;
    v_periodic integer := 0;
BEGIN
    FOR v_due IN
        SELECT
            m.id, m.channel_id, m.channel, m.dequeue_at, m.is_locked, m.is_admitted, m.num_failures, m.schedule,
            m.key, m.state, GREATEST(m.dequeue_at, m.created_at) AS due_key
        FROM @extschema@.message AS m
        WHERE
            GREATEST(m.dequeue_at, m.created_at) >= p_due_mark AND GREATEST(m.dequeue_at, m.created_at) <= p_now
            AND m.position IS NULL AND NOT m.is_held
        ORDER BY GREATEST(m.dequeue_at, m.created_at), m.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        -- The first row has the least key: noted for a raise later in this
        -- transaction, which must not pass it (_due_taken_note).
        IF NOT v_noted THEN
            PERFORM @extschema@._due_taken_note(v_due.due_key);
            v_noted := TRUE;
        END IF;
        -- A channel whose configuration is changing right now is left for
        -- the next call (its change waits for no consumer).
        CONTINUE WHEN NOT @extschema@._channel_guard_try_shared(v_due.channel);
        -- A wake (schedule ''; _channel_admit): the channel's walk again,
        -- under its row lock and its hold guard, both tried, then the wake
        -- goes; without them it is due again later, 10 ms doubling up to a
        -- second (num_attempts counts its tries: a producer that holds the
        -- guard may be in a long transaction).
        IF v_due.schedule = '' THEN
            -- A release row (its key the parent's end, its state the last
            -- child resolved): the next dependents of an ended message
            -- (_message_release_run).
            IF v_due.key IS NOT NULL THEN
                PERFORM @extschema@._message_release_run(
                    v_due.id, pg_catalog.convert_from(v_due.state, 'UTF8')::bigint, v_due.key
                );
                CONTINUE;
            END IF;
            IF @extschema@._channel_row_try_lock(v_due.channel_id)
                AND pg_catalog.pg_try_advisory_xact_lock(1819111686, pg_catalog.hashint8(v_due.channel_id)) THEN
                PERFORM @extschema@._channel_admit(v_due.channel_id, 0, 0, p_now, NULL);
                DELETE FROM @extschema@.message AS m WHERE m.id = v_due.id;
            ELSE
                UPDATE @extschema@.message AS m SET num_attempts = m.num_attempts + 1,
                    dequeue_at = @extschema@._clock_ms() + LEAST(10 << LEAST(m.num_attempts, 7), 1000) WHERE m.id = v_due.id;
            END IF;
            CONTINUE;
        END IF;
        v_channel := @extschema@._channel_config(v_due.channel_id, v_due.channel);
        -- A schedule's occurrence: the following one is created, and this
        -- one is its schedule's message at the latest boundary passed
        -- (NULL: left due, or deleted).
        IF v_due.schedule IS NOT NULL THEN
            v_due.dequeue_at := @extschema@._schedule_next(v_due.id, v_due.schedule, v_due.dequeue_at, v_channel, p_now);
            CONTINUE WHEN v_due.dequeue_at IS NULL;
            v_periodic := v_periodic + 1;
        END IF;
        v_is_dead := COALESCE(v_due.is_locked AND v_due.num_failures + 1 >= v_channel.max_attempts, FALSE);
        -- Paused: held.  With limits: held unless admitted already, or
        -- unless its takes claim (placed, its take claims).
        v_is_held := NOT v_is_dead AND @extschema@._channel_promotes(v_channel)
            AND (v_channel.is_paused OR NOT v_due.is_admitted);
        -- Admission, a release, and a dead letter's count in a max_size
        -- channel write the channel's row.  One whose row lock another
        -- call holds (a complete, a take, another promotion of it) is left
        -- due for a later dequeue: consumers never wait for a channel row
        -- here (_channel_row_try_lock).
        IF v_is_held OR v_is_dead AND (v_due.is_admitted OR v_channel.max_size IS NOT NULL)
            OR v_due.is_admitted AND v_due.is_locked AND v_channel.release_interval_ms > 0 THEN
            CONTINUE WHEN NOT @extschema@._channel_row_try_lock(v_due.channel_id);
            -- (Read again under the lock: its release and pending count.)
            v_channel := @extschema@._channel_config(v_due.channel_id, v_due.channel);
        END IF;
        -- A lapsed lock, found (counted, lonnymq_messages_lock_expired_total:
        -- a sequence, no row).
        IF v_due.is_locked THEN PERFORM pg_catalog.nextval('@extschema@.messages_lock_expired_seq'); END IF;
        IF v_is_dead THEN
            PERFORM @extschema@._message_bury(
                v_due.id, v_due.channel_id, v_due.channel, 'lock expired', p_now, v_channel.dedup_window_ms
            );
        ELSIF v_is_held THEN
            UPDATE @extschema@.message AS m SET is_held = TRUE, is_admitted = FALSE WHERE m.id = v_due.id;
            -- A channel that follows a pattern with limits gets its row
            -- (its admission counts) here, at its first admission; it goes
            -- when they are back to nothing (_channel_admit).
            IF v_channel.pattern IS NOT NULL THEN
                v_channel.created_at := p_now;
                INSERT INTO @extschema@.channel
                SELECT (v_channel).*
                ON CONFLICT DO NOTHING;
            END IF;
        ELSIF v_due.is_locked AND v_due.is_admitted AND v_channel.release_interval_ms > 0
            AND (v_channel.release_at > p_now OR v_channel.num_pending > 0) THEN
            -- An expired lock's new delivery waits for its channel's
            -- release like any other: due again when the interval ends (a
            -- later end when another delivery is pending).
            UPDATE @extschema@.message AS m
            SET dequeue_at = GREATEST(v_channel.release_at, p_now)
                + CASE WHEN v_channel.num_pending > 0 THEN v_channel.release_interval_ms ELSE 0 END
            WHERE m.id = v_due.id;
        ELSE
            -- (An expired lock of a channel with a release interval is
            -- its one pending delivery.)
            IF v_due.is_locked AND v_due.is_admitted AND v_channel.release_interval_ms > 0 THEN
                -- (Under its row lock: the newest version is the row.)
                UPDATE @extschema@.channel AS c SET num_pending = c.num_pending + 1
                WHERE c.ctid = (
                    SELECT r.ctid FROM @extschema@.channel AS r
                    WHERE r.id >= v_due.channel_id AND r.id <= v_due.channel_id
                    ORDER BY r.id DESC LIMIT 1
                );
            END IF;
            -- Ready: a scheduled message, or an admitted one (an expired
            -- lock stays admitted, and counted, until it is delivered again;
            -- one that holds a claim keeps it).
            UPDATE @extschema@.message AS m
            SET position = p.place, is_early = p.is_early, is_limited = @extschema@._channel_claims(v_channel)
            FROM @extschema@._message_place(v_due.channel_id, p_bound, v_due.dequeue_at, 0) AS p
            WHERE m.id = v_due.id;
        END IF;
        -- An admitted message that ends, or goes back to be held, frees
        -- its place; a held one may be admitted at once.
        IF v_is_held OR v_is_dead AND v_due.is_admitted THEN
            PERFORM @extschema@._channel_admit(
                v_due.channel_id, v_due.is_admitted::integer, 0, p_now, CASE WHEN v_is_held THEN v_due.dequeue_at END
            );
        END IF;
    END LOOP;
    RETURN v_periodic;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_promote(bigint, bigint, bigint, integer) IS
'Internal: make up to p_limit due messages (scheduled, retried, deferred, expired locks, waiting for admission) ready, held for admission, or dead letters.';

REVOKE ALL ON FUNCTION @extschema@._message_promote(bigint, bigint, bigint, integer) FROM PUBLIC;
