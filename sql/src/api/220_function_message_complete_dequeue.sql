-- Complete the deliveries p_ids[k] with fencing tokens p_num_attempts[k]
-- (_message_complete_set; none when both are empty or NULL), then deliver
-- up to p_limit messages, locking each for p_lock_ms, in the same
-- transaction: a worker's loop at one call per message.  A place that the
-- completes freed in a channel with max_concurrency is free for this call.
-- Each pair not completed (stale token, not locked, locked by another role)
-- is reported as a NOTICE with SQLSTATE 01LQ1, whose detail gives the id
-- and the token, so that a worker can log it; the deliveries go on.
-- message_dequeue is this call with nothing to complete.
--
-- The delivery: one path for 1 or N messages, with or without p_channel.
-- Every step is a bounded number of index probes:
--   1. due schedules (up to 4 materialised) and due wake-ups (up to 8
--      applied: a waiting channel that got an earlier message joins the
--      rotation at the back as of the wake-up's time), checked in the same
--      statement that reads the front of the rotation (channel_rotation_ix);
--   2. hold up to p_limit front channels (or the one of p_channel): a
--      channel with max_concurrency or a release interval, or one this call
--      will move to the back (it is not alone), is locked as it was read
--      (SKIP LOCKED); one with limits that another consumer holds or has
--      moved is skipped, one without is passed over for the next and taken
--      from without its row when the front has nothing more.  A channel
--      without limits that is alone is taken from by any number of
--      consumers at once, as from a plain SKIP LOCKED table.  The consumer
--      guard is held shared, so that a channel_set giving the channel
--      limits waits for this call (and its locks are counted);
--   3. share the batch among them round-robin, each channel's share in one
--      take (the one statement that takes messages: one index range scan
--      from the channel's floor);
--      a channel that gives less than its share drops out and the rest is
--      shared again, reading more channels from the front when all dropped
--      (at most p_limit + 16 visited);
--   4. one decision per visited channel of where it goes next
--      (_channel_place), in the order of its last delivery in this batch,
--      so that the rotation continues as if the messages had been taken one
--      at a time.
-- The rows come back in that order too.  In the common case (one channel
-- without limits) this is the front read, the guard, the channel's fresh
-- row, its take, and no write of the channel row.
CREATE FUNCTION @extschema@.message_complete_dequeue(
    p_ids bigint[],
    p_num_attempts integer[],
    p_lock_ms bigint,
    p_limit integer DEFAULT 1,
    p_channel text DEFAULT NULL
)
RETURNS SETOF @extschema@.delivery
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_limit integer := COALESCE(p_limit, 1);
    -- Evaluated once, not once per message taken.
    v_caller pg_catalog.regrole := @extschema@._caller_role();
    v_remaining integer;
    v_applied boolean := FALSE;
    v_reread boolean;
    v_schedule_due boolean;
    v_wake_due boolean;
    v_front @extschema@.channel[];
    v_is_alone boolean;
    v_wake record;
    v_next bigint;
    v_channel @extschema@.channel%ROWTYPE;
    -- The channels visited, in rotation order, and what each gave.
    v_first integer;
    v_visits @extschema@._channel_visit[] := '{}';
    v_visit @extschema@._channel_visit;
    v_seen bigint[] := '{}';
    v_is_held boolean;
    v_busy @extschema@.channel[] := '{}';
    v_busy_turn boolean := FALSE;
    v_live integer;
    v_share integer;
    v_extra integer;
    v_rank integer;
    v_want integer;
    v_got integer;
    v_new integer;
    v_pass integer;
    v_expired_only boolean;
    v_dead_ids bigint[];
    v_id bigint;
    v_min_at bigint;
    i integer;
    -- The messages taken, returned in rotation order at the end.
    v_out @extschema@._taken[] := '{}';
BEGIN
    IF p_lock_ms IS NULL OR p_lock_ms NOT BETWEEN 1 AND @extschema@._max_duration_ms() THEN
        PERFORM @extschema@._check_lock_ms(p_lock_ms);
    END IF;
    IF p_channel IS NOT NULL AND pg_catalog.length(p_channel) NOT BETWEEN 1 AND 255 THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    IF v_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'lonnymq: p_limit must be between 1 and 1000, got %', v_limit
            USING ERRCODE = '22023';
    END IF;
    IF p_ids IS NOT NULL OR p_num_attempts IS NOT NULL THEN
        PERFORM @extschema@._message_complete_set(COALESCE(p_ids, '{}'), COALESCE(p_num_attempts, '{}'), v_caller, TRUE);
    END IF;
    v_remaining := v_limit;
    WHILE v_remaining > 0 LOOP
        -- 1 and 2. The front of the rotation (one more channel than is
        -- served: is the first one alone?), and whether anything is due.
        -- After the due wake-ups were applied, the channels of those left
        -- (another consumer is applying them right now: SKIP LOCKED below)
        -- are served after the front when it is short, read in the same
        -- snapshot (_channel_wake_front is STABLE), so that their consumers
        -- never find them empty meanwhile.
        SELECT
            NOT v_applied AND EXISTS (
                SELECT 1 FROM @extschema@.schedule AS s WHERE s.next_at <= k.now
            ),
            NOT v_applied AND EXISTS (
                SELECT 1 FROM @extschema@.channel_wake AS w WHERE w.wake_at <= k.now
            ),
            f.front || CASE
                WHEN v_applied AND pg_catalog.cardinality(f.front) < v_remaining
                    THEN @extschema@._channel_wake_front(k.now, v_seen, p_channel)
                ELSE '{}'
            END,
            k.now
        INTO v_schedule_due, v_wake_due, v_front, v_now
        FROM
            -- The clock, read after this statement's snapshot was taken: a
            -- channel that another consumer's committed write put at its
            -- own clock is eligible here (read before, it could be later
            -- than ours, and the channel missed).
            (SELECT @extschema@._clock_ms() AS now) AS k,
            LATERAL (
                SELECT CASE
                    WHEN p_channel IS NULL THEN ARRAY(
                        SELECT c
                        FROM @extschema@.channel AS c
                        WHERE c.next_at <= k.now AND c.id <> ALL(v_seen)
                        ORDER BY c.next_at, c.turn
                        LIMIT GREATEST(LEAST(v_remaining + 1, v_limit + 16 - pg_catalog.cardinality(v_seen)), 0)
                    )
                    ELSE ARRAY(
                        SELECT c
                        FROM @extschema@.channel AS c
                        WHERE c.name = p_channel AND c.next_at <= k.now AND c.id <> ALL(v_seen)
                    )
                END AS front
            ) AS f;
        IF v_schedule_due OR v_wake_due THEN
            v_applied := TRUE;
            -- Read the front again unless nothing that was applied can
            -- change it (wake-ups of other channels than p_channel's).
            v_reread := CASE WHEN v_schedule_due THEN @extschema@._schedule_run(v_now, 4) > 0 ELSE FALSE END;
            v_reread := v_reread OR p_channel IS NULL;
            -- A waiting channel got a message deliverable earlier than it
            -- was waiting for.  It joins the rotation at the back as of the
            -- wake-up's time (when that message became deliverable, never
            -- before it was created), not at the message's dequeue_at.
            FOR v_wake IN
                SELECT w.id AS wake_id, w.wake_at, c.*
                FROM @extschema@.channel_wake AS w
                INNER JOIN @extschema@.channel AS c ON c.id = w.channel_id
                WHERE w.wake_at <= v_now
                ORDER BY w.wake_at, w.id
                LIMIT 8
                FOR UPDATE OF w SKIP LOCKED
                FOR NO KEY UPDATE OF c SKIP LOCKED
            LOOP
                IF v_wake.wait_at IS NOT NULL THEN
                    -- Not before its release interval; a channel already due
                    -- earlier (or, at max_concurrency, waiting for a lock's
                    -- expiry) keeps that time.
                    v_next := CASE
                        WHEN v_wake.num_locked >= v_wake.max_concurrency AND v_wake.next_at IS NOT NULL
                            THEN v_wake.next_at
                        ELSE LEAST(
                            v_wake.next_at,
                            GREATEST(v_wake.wake_at, v_wake.last_served_at + v_wake.release_interval_ms)
                        )
                    END;
                    UPDATE @extschema@.channel AS c
                    SET
                        wait_at = NULL,
                        next_at = v_next,
                        turn = @extschema@._channel_turn(c.next_at, v_next, c.turn)
                    WHERE c.id = v_wake.id;
                    v_reread := v_reread OR v_wake.name = p_channel;
                END IF;
                DELETE FROM @extschema@.channel_wake AS w WHERE w.id = v_wake.wake_id;
            END LOOP;
            CONTINUE WHEN v_reread;
        END IF;

        -- When the front has nothing more, the channels that other
        -- consumers were serving are taken from, once, without their rows.
        IF pg_catalog.cardinality(v_front) = 0 AND NOT v_busy_turn THEN
            v_front := v_busy;
            v_busy_turn := TRUE;
        END IF;
        -- Served by name, a channel goes to the back of the rotation.
        v_is_alone := COALESCE(v_is_alone, p_channel IS NULL AND pg_catalog.cardinality(v_front) = 1);


        -- 2. Hold the front channels.
        v_first := pg_catalog.cardinality(v_visits) + 1;
        EXIT WHEN pg_catalog.cardinality(v_front) = 0;
        -- (All of the busy ones: each drops out when it gives nothing.)
        FOR j IN 1..CASE
            WHEN v_busy_turn THEN pg_catalog.cardinality(v_front)
            ELSE LEAST(pg_catalog.cardinality(v_front), v_remaining)
        END LOOP
            v_channel := v_front[j];
            v_seen := v_seen || v_channel.id;
            PERFORM @extschema@._channel_guard_consumer(v_channel.name);
            -- A channel with limits, or one this call will move (it is not
            -- alone), is locked, as it was read: unless another consumer
            -- holds it or has moved it since (its turn changed).
            v_is_held := FALSE;
            IF v_channel.max_concurrency IS NOT NULL OR v_channel.release_interval_ms > 0 OR NOT v_is_alone THEN
                SELECT c.* INTO v_channel
                FROM @extschema@.channel AS c
                WHERE c.id = v_front[j].id AND c.turn = v_front[j].turn AND c.next_at <= v_now
                FOR NO KEY UPDATE SKIP LOCKED;
                v_is_held := FOUND;
            END IF;
            IF NOT v_is_held AND NOT v_is_alone AND NOT v_busy_turn THEN
                -- Another consumer is serving it: the next channel first.
                v_busy := v_busy || v_front[j];
                CONTINUE;
            END IF;
            IF NOT v_is_held THEN
                -- A channel without limits is read again after the guard,
                -- for its limits, and taken from without its row: its ready
                -- messages are delivered all the same (nothing early), so
                -- that the consumers of a busy channel never find it empty.
                SELECT c.* INTO v_channel
                FROM @extschema@.channel AS c
                WHERE
                    c.id = v_front[j].id AND NOT c.is_paused
                    AND c.max_concurrency IS NULL AND c.release_interval_ms = 0;
                CONTINUE WHEN NOT FOUND;
            END IF;
            -- What it may give: up to its free places (at max_concurrency,
            -- its expired locks), and one message when it has a release
            -- interval.
            v_visits := v_visits || ROW(
                v_channel, v_is_held,
                CASE
                    WHEN v_channel.release_interval_ms > 0 THEN 1
                    WHEN v_channel.num_locked >= v_channel.max_concurrency THEN v_limit
                    ELSE COALESCE(v_channel.max_concurrency - v_channel.num_locked, v_limit)
                END,
                0, 0, 0, NULL, NULL, FALSE
            )::@extschema@._channel_visit;
        END LOOP;

        -- 3. Share what is left among the live channels: equal shares, the
        -- remainder to the first ones in turn order; a channel that gives
        -- less than its share drops out and the rest is shared again.  Each
        -- pass asks at least one live channel for a message (the remainder
        -- goes to the first), which either gives it or drops out: the loop
        -- ends.
        v_live := pg_catalog.cardinality(v_visits) - v_first + 1;
        LOOP
            EXIT WHEN v_live <= 0 OR v_remaining = 0;
            v_share := v_remaining / v_live;
            v_extra := v_remaining % v_live;
            v_rank := 0;
            FOR i IN v_first..pg_catalog.cardinality(v_visits) LOOP
                v_visit := v_visits[i];
                CONTINUE WHEN v_visit.cap <= 0;
                v_want := LEAST(v_visit.cap, v_share + CASE WHEN v_rank < v_extra THEN 1 ELSE 0 END);
                v_rank := v_rank + 1;
                CONTINUE WHEN v_want <= 0;
                -- The one statement that takes messages: up to v_want of the
                -- channel's first deliverable messages, in (dequeue_at, id)
                -- order, SKIP LOCKED, from its floor (at max_concurrency only
                -- its expired locks: _message_head), locked for p_lock_ms,
                -- appended to the output.
                -- An expired lock that is the message's max_attempts-th
                -- failure is not taken but goes to the dead letters, and is
                -- replaced (each freed a place): at most v_limit + 16 buried
                -- per channel.
                v_channel := v_visit.channel;
                v_visit.floor_at := @extschema@._channel_scan_from(v_channel.id);
                v_expired_only := COALESCE(v_channel.num_locked >= v_channel.max_concurrency, FALSE);
                v_got := 0;
                LOOP
                    WITH head AS (
                        SELECT *
                        FROM @extschema@._message_head(
                            v_channel.id, v_visit.floor_at, v_now, v_want - v_got, v_expired_only
                        )
                    ),

                    taken AS (
                        UPDATE @extschema@.message AS m
                        SET
                            dequeue_at = v_now + p_lock_ms,
                            is_locked = TRUE,
                            is_counted = v_channel.max_concurrency IS NOT NULL,
                            locked_by = v_caller,
                            num_attempts = m.num_attempts + 1,
                            -- An expired lock was a failed delivery.
                            num_failures = m.num_failures + CASE WHEN m.is_locked THEN 1 ELSE 0 END,
                            attempt_log = CASE
                                WHEN m.is_locked THEN
                                    @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, v_now, 'lock expired')
                                ELSE m.attempt_log
                            END
                        FROM head AS h
                        WHERE
                            m.id = h.id
                            AND NOT (h.is_locked AND h.num_failures + 1 >= v_channel.max_attempts) IS TRUE
                        RETURNING m.id, m.content, m.state, m.num_attempts, h.dequeue_at AS old_at, h.is_locked AS old_locked
                    )

                    SELECT
                        pg_catalog.count(*),
                        pg_catalog.count(*) FILTER (WHERE NOT t.old_locked),
                        pg_catalog.min(t.old_at),
                        v_out || pg_catalog.array_agg(
                            ROW(i, t.id, t.content, t.state, t.num_attempts, t.old_at, t.old_locked)::@extschema@._taken
                        ),
                        ARRAY(
                            SELECT h.id
                            FROM head AS h
                            WHERE h.is_locked AND h.num_failures + 1 >= v_channel.max_attempts
                        )
                    INTO v_pass, v_new, v_min_at, v_out, v_dead_ids
                    FROM taken AS t;
                    v_got := v_got + v_pass;
                    v_visit.num_fresh := v_visit.num_fresh + v_new;
                    v_visit.first_at := LEAST(v_visit.first_at, v_min_at);
                    EXIT WHEN pg_catalog.cardinality(v_dead_ids) = 0;
                    FOREACH v_id IN ARRAY v_dead_ids LOOP
                        PERFORM @extschema@._message_bury(
                            v_id, v_channel.id, v_channel.name, 'lock expired', v_now,
                            v_channel.dedup_window_ms
                        );
                    END LOOP;
                    v_visit.num_dead := v_visit.num_dead + pg_catalog.cardinality(v_dead_ids);
                    EXIT WHEN v_visit.num_dead >= v_limit + 16;
                    v_expired_only := FALSE;
                END LOOP;
                v_visit.num_taken := v_visit.num_taken + v_got;
                v_visit.cap := v_visit.cap - v_got;
                v_remaining := v_remaining - v_got;
                v_visit.came_short := v_got < v_want;
                IF v_visit.came_short OR v_visit.cap <= 0 THEN
                    -- It drops out.
                    v_visit.cap := 0;
                    v_live := v_live - 1;
                END IF;
                v_visits[i] := v_visit;
            END LOOP;
        END LOOP;

        EXIT WHEN v_busy_turn OR p_channel IS NOT NULL AND pg_catalog.cardinality(v_busy) = 0;
    END LOOP;

    -- 4. Where each visited channel goes next, in the order of its last
    -- delivery in this batch (those that gave nothing first).
    -- (One statement: a volatile call in the select list is made after the
    -- sort, in its order.)
    PERFORM @extschema@._channel_place(v_visits[k.i], v_now)
    FROM pg_catalog.generate_subscripts(v_visits, 1) AS k (i)
    ORDER BY (v_visits[k.i]).num_taken, k.i;

    RETURN QUERY
    SELECT d.id, ((v_visits[d.visit]).channel).name, d.content, d.state, d.num_attempts, d.dequeue_at, d.is_recovered
    FROM pg_catalog.unnest(v_out) AS d
    ORDER BY pg_catalog.row_number() OVER (PARTITION BY d.visit ORDER BY d.dequeue_at, d.id), d.visit;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_complete_dequeue(bigint[], integer[], bigint, integer, text) IS
'Complete the deliveries p_ids[k] with fencing tokens p_num_attempts[k] (each one refused raises a NOTICE, SQLSTATE 01LQ1), then deliver up to p_limit ready messages (default 1), channels served round-robin within their limits, each locked for p_lock_ms. Expired locks are recovered here (is_recovered). num_attempts is the fencing token for complete, defer and heartbeat. Returns no rows when nothing is ready.';

REVOKE ALL ON FUNCTION @extschema@.message_complete_dequeue(bigint[], integer[], bigint, integer, text) FROM PUBLIC;
