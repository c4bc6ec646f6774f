-- Deliver up to p_limit messages, locking each for p_lock_ms.
--
-- The fast path: no p_channel, no due schedule or wake-up, and a single
-- eligible channel, without limits.  With no other channel waiting for a
-- turn, serving it leaves its place in the rotation unchanged (it would
-- still come first), so its row is neither locked nor written: any number of
-- consumers take from it at once, as from a plain SKIP LOCKED table.  Two
-- index probes (the rotation's first two eligible channels with the due
-- schedules and wake-ups, in one statement; the channel's first deliverable
-- messages) and one UPDATE by primary key: of the one message, or of the
-- whole batch at once; the probe of the messages and the UPDATE are one
-- statement.  Like the general way's step 4, it holds the channel guard
-- shared, so that a channel_set giving the channel limits waits for this
-- call.
--
-- Every other case (p_channel, several eligible channels, limits, a due
-- schedule or wake-up, nothing taken, an expired lock due for the dead
-- letters) goes the general way: _message_dequeue_general, which serves
-- channels round-robin with a bounded number of probes (see there).
CREATE FUNCTION @extschema@.message_dequeue(
    p_lock_ms bigint,
    p_limit integer DEFAULT 1,
    p_channel text DEFAULT NULL
)
RETURNS TABLE (
    id bigint,
    channel text,
    content bytea,
    state bytea,
    num_attempts integer,
    dequeue_at bigint,
    is_recovered boolean
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
#variable_conflict use_column
DECLARE
    v_now bigint;
    v_limit integer := COALESCE(p_limit, 1);
    v_due boolean;
    v_schedule_due boolean;
    v_wakes bigint[];
    v_wake_at bigint;
    v_front_at bigint;
    v_channel_id bigint;
    v_more boolean;
    v_head bigint;
    v_wait bigint;
    v_next bigint;
    v_locked integer;
    v_max_concurrency integer;
    v_was_wait bigint;
    v_was_next bigint;
    v_stays boolean;
    v_tried bigint[];
    v_tried_id bigint;
    v_plain boolean;
    v_head_id bigint;
    v_fronts @extschema@.channel[];
    v_front_id bigint;
    v_front_name text;
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    IF p_lock_ms IS NULL OR p_lock_ms NOT BETWEEN 1 AND 31536000000 THEN
        PERFORM @extschema@._check_lock_ms(p_lock_ms);
    END IF;
    IF p_channel IS NOT NULL AND pg_catalog.length(p_channel) NOT BETWEEN 1 AND 255 THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    IF v_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'lonnymq: p_limit must be between 1 and 1000, got %', v_limit
            USING ERRCODE = '22023';
    END IF;
    v_now := @extschema@._clock_ms();

    IF p_channel IS NULL THEN
        SELECT
            EXISTS (
                SELECT 1
                FROM @extschema@.schedule AS s
                WHERE s.next_at <= v_now
            ),
            ARRAY(
                SELECT w.wake_at
                FROM @extschema@.channel_wake AS w
                WHERE w.wake_at <= v_now
                ORDER BY w.wake_at, w.id
                LIMIT 2
            ),
            ARRAY(
                SELECT c
                FROM @extschema@.channel AS c
                WHERE c.next_at <= v_now
                ORDER BY c.next_at, c.turn
                LIMIT 2
            )
        INTO v_schedule_due, v_wakes, v_fronts;
        v_front_id := (v_fronts[1]).id;
        v_front_name := (v_fronts[1]).name;
        v_front_at := (v_fronts[1]).next_at;
        v_wake_at := v_wakes[1];
        v_due := v_schedule_due OR v_wake_at IS NOT NULL;
        IF NOT v_due
            AND pg_catalog.cardinality(v_fronts) = 1
            AND @extschema@._channel_guard_try_shared(v_front_name) THEN
            IF v_limit = 1 THEN
                -- One statement: lock the channel's first deliverable
                -- message (if the channel, read after the guard, is still
                -- without limits) and update it by primary key.  The old
                -- dequeue_at and lock come from the locking scan.
                WITH head AS (
                    SELECT q.id, q.dequeue_at, q.is_locked
                    FROM @extschema@.message AS q
                    WHERE
                        q.channel_id = v_front_id
                        AND q.dequeue_at <= v_now
                        AND EXISTS (
                            SELECT 1
                            FROM @extschema@.channel AS c
                            WHERE
                                c.id = v_front_id
                                AND c.max_concurrency IS NULL
                                AND c.release_interval_ms = 0
                                AND NOT c.is_paused
                                AND c.next_at <= v_now
                        )
                    ORDER BY q.dequeue_at, q.id
                    LIMIT 1
                    FOR UPDATE OF q SKIP LOCKED
                )

                UPDATE @extschema@.message AS m
                SET
                    dequeue_at = v_now + p_lock_ms,
                    is_locked = TRUE,
                    is_counted = FALSE,
                    num_attempts = m.num_attempts + 1,
                    attempt_log = CASE
                        WHEN m.is_locked THEN
                            @extschema@._attempt_log_append(
                                m.attempt_log, m.num_attempts, v_now, 'lock expired'
                            )
                        ELSE m.attempt_log
                    END
                WHERE
                    m.id = (SELECT h.id FROM head AS h)
                    -- An expired lock due for the dead letters: not here.
                    AND NOT (
                        m.is_locked AND m.num_attempts >= (
                            SELECT c.max_attempts FROM @extschema@.channel AS c WHERE c.id = v_front_id
                        )
                    ) IS TRUE
                RETURNING
                    m.id, m.content, m.state, m.num_attempts,
                    (SELECT h.dequeue_at FROM head AS h),
                    (SELECT h.is_locked FROM head AS h)
                INTO id, content, state, num_attempts, dequeue_at, is_recovered;
                IF FOUND THEN
                    channel := v_front_name;
                    RETURN NEXT;
                    RETURN;
                END IF;
            ELSE
                SELECT c.* INTO v_channel
                FROM @extschema@.channel AS c
                WHERE c.id = v_front_id;
                IF FOUND
                    AND v_channel.max_concurrency IS NULL
                    AND v_channel.release_interval_ms = 0
                    AND NOT v_channel.is_paused
                    AND v_channel.next_at <= v_now THEN
                    -- A batch, in one statement: lock the channel's first
                    -- p_limit deliverable messages (one range scan, from the
                    -- channel's floor_at when it has no floor mark: not over
                    -- the index entries of the messages consumed since the
                    -- last VACUUM), update each by primary key (the locked
                    -- rows drive the join), and return them in delivery
                    -- order.  An expired lock due for the dead letters among
                    -- them: nothing is updated and the general way takes
                    -- over (it buries that one; the row locks taken here are
                    -- this transaction's own).
                    RETURN QUERY
                    WITH head AS (
                        SELECT q.id, q.dequeue_at, q.is_locked, q.num_attempts
                        FROM @extschema@.message AS q
                        WHERE
                            q.channel_id = v_channel.id
                            AND q.dequeue_at >= (
                                SELECT CASE
                                    WHEN EXISTS (
                                        SELECT 1
                                        FROM @extschema@.channel_floor_mark AS k
                                        WHERE k.channel_id = f.id
                                    ) THEN -9223372036854775808
                                    ELSE COALESCE(f.floor_at, -9223372036854775808)
                                END
                                FROM @extschema@.channel AS f
                                WHERE f.id = v_channel.id
                            )
                            AND q.dequeue_at <= v_now
                        ORDER BY q.dequeue_at, q.id
                        LIMIT v_limit
                        FOR UPDATE SKIP LOCKED
                    ),

                    taken AS (
                        UPDATE @extschema@.message AS m
                        SET
                            dequeue_at = v_now + p_lock_ms,
                            is_locked = TRUE,
                            is_counted = FALSE,
                            num_attempts = m.num_attempts + 1,
                            attempt_log = CASE
                                WHEN m.is_locked THEN
                                    @extschema@._attempt_log_append(
                                        m.attempt_log, m.num_attempts, v_now, 'lock expired'
                                    )
                                ELSE m.attempt_log
                            END
                        FROM head AS h
                        WHERE
                            m.id = h.id
                            AND NOT EXISTS (
                                SELECT 1
                                FROM head AS b
                                WHERE b.is_locked AND b.num_attempts >= v_channel.max_attempts
                            )
                        RETURNING m.id, m.content, m.state, m.num_attempts, h.dequeue_at AS old_at, h.is_locked AS old_locked
                    )

                    SELECT
                        t.id, v_channel.name, t.content, t.state, t.num_attempts,
                        t.old_at, t.old_locked
                    FROM taken AS t
                    ORDER BY t.old_at, t.id;
                    IF FOUND THEN
                        -- At most once a second, when no producer of the
                        -- channel is in flight: raise the floor to its
                        -- first message (_channel_floor_raise).
                        IF (v_channel.floor_checked_at IS NULL OR v_channel.floor_checked_at <= v_now - 1000)
                            AND pg_catalog.current_setting('transaction_isolation') = 'read committed'
                            AND @extschema@._channel_guard_try_exclusive(v_channel.name) THEN
                            PERFORM @extschema@._channel_floor_raise(v_channel.id, v_now);
                        END IF;
                        RETURN;
                    END IF;
                END IF;
            END IF;
        END IF;
    END IF;


    -- One message without p_channel and no due schedule, from a channel
    -- without a release interval and below its max_concurrency: serve the
    -- channel that comes first, from its due
    -- wake-up (when that is not later than the rotation's front, or the
    -- rotation is empty: a woken channel would join the rotation at the back
    -- and be served at once; a wake-up and a turn in the same millisecond go
    -- wake-up first, since a wake-up already due was applied before the
    -- call served anything) or from the front of the rotation.  Three statements,
    -- and the channel row written once: lock the channel (and its wake-up)
    -- and take its first deliverable message in one statement; then the
    -- channel's next place, which the general way's step 5 would give it
    -- (the back of the rotation, or waiting when nothing deliverable is
    -- left, or, at max_concurrency now, its first lock's expiry).  A front
    -- of the rotation without limits and with nothing deliverable is put in
    -- its place and the next front tried (three at most); when every front
    -- is held by other consumers (or was tried), a due wake-up is served
    -- instead.  When the channel that comes first has a release interval, is
    -- at its max_concurrency, or (a woken channel) has nothing deliverable or
    -- is held by another consumer, the general way decides.
    IF p_channel IS NULL AND v_limit = 1 AND NOT v_schedule_due
        AND (v_wake_at IS NOT NULL OR v_front_at IS NOT NULL) THEN
        IF v_front_at IS NOT NULL AND (v_wake_at IS NULL OR v_front_at < v_wake_at) THEN
            -- The front of the rotation that no other consumer is serving.
            -- A front without limits that has nothing deliverable (its last
            -- messages were taken since it came round, or are held by other
            -- consumers) is put in its place as the general way would
            -- (_channel_nothing_ready: waiting, out of the rotation, or its
            -- back), and the next front is tried: three fronts at most.
            v_tried := '{}';
            FOR v_try IN 1..3 LOOP
                WITH front AS (
                    SELECT c.id, c.name, c.max_attempts, c.max_concurrency, c.num_locked, c.release_interval_ms
                    FROM @extschema@.channel AS c
                    WHERE c.next_at <= v_now AND c.id <> ALL(v_tried)
                    ORDER BY c.next_at, c.turn
                    LIMIT 1
                    FOR NO KEY UPDATE SKIP LOCKED
                ),

                served AS (
                    SELECT f.id, f.name, f.max_attempts, f.max_concurrency, f.num_locked
                    FROM front AS f
                    WHERE
                        (f.max_concurrency IS NULL OR f.num_locked < f.max_concurrency)
                        AND f.release_interval_ms = 0
                ),

                head AS (
                    SELECT q.id, q.dequeue_at, q.is_locked
                    FROM @extschema@.message AS q
                    WHERE
                        q.channel_id = (SELECT o.id FROM served AS o)
                        AND q.dequeue_at <= v_now
                    ORDER BY q.dequeue_at, q.id
                    LIMIT 1
                    FOR UPDATE OF q SKIP LOCKED
                ),

                taken AS (
                    UPDATE @extschema@.message AS m
                    SET
                        dequeue_at = v_now + p_lock_ms,
                        is_locked = TRUE,
                        is_counted = (SELECT o.max_concurrency IS NOT NULL FROM served AS o),
                        num_attempts = m.num_attempts + 1,
                        attempt_log = CASE
                            WHEN m.is_locked THEN
                                @extschema@._attempt_log_append(
                                    m.attempt_log, m.num_attempts, v_now, 'lock expired'
                                )
                            ELSE m.attempt_log
                        END
                    WHERE
                        m.id = (SELECT h.id FROM head AS h)
                        -- An expired lock due for the dead letters: not here.
                        AND NOT (
                            m.is_locked AND m.num_attempts >= (SELECT o.max_attempts FROM served AS o)
                        ) IS TRUE
                    RETURNING
                        m.id, m.content, m.state, m.num_attempts, m.channel_id,
                        EXISTS (
                            SELECT 1
                            FROM @extschema@.message AS q
                            WHERE
                                q.channel_id = m.channel_id
                                AND q.dequeue_at <= v_now
                                AND q.id <> m.id
                        ) AS more
                )

                SELECT
                    f.id, (SELECT o.id FROM served AS o) IS NOT NULL, h.id,
                    t.id, t.content, t.state, t.num_attempts, h.dequeue_at, h.is_locked,
                    f.name, f.max_concurrency, f.num_locked, t.channel_id, t.more
                INTO v_tried_id, v_plain, v_head_id,
                    id, content, state, num_attempts, dequeue_at, is_recovered,
                    channel, v_max_concurrency, v_locked, v_channel_id, v_more
                FROM front AS f
                LEFT JOIN head AS h ON TRUE
                LEFT JOIN taken AS t ON TRUE;
                -- Served; or no front left (all the row targets are NULL
                -- then, v_tried_id too: a due wake-up is served below); or a
                -- front with limits, or whose first message is due for the
                -- dead letters: the general way.
                EXIT WHEN NOT FOUND OR id IS NOT NULL OR v_head_id IS NOT NULL OR NOT v_plain;
                SELECT c.* INTO v_channel
                FROM @extschema@.channel AS c
                WHERE c.id = v_tried_id;
                PERFORM @extschema@._channel_nothing_ready(v_channel, v_now);
                v_tried := v_tried || v_tried_id;
            END LOOP;
        END IF;
        -- The first due wake-up when it comes first, or when the rotation
        -- had no front left that another consumer is not serving.
        IF v_wake_at IS NOT NULL AND id IS NULL AND v_tried_id IS NULL THEN
            -- The first due wake-up nobody else holds, and its channel if
            -- it is still waiting (the row lock makes a channel_set wait;
            -- its EvalPlanQual re-check reads the newest version).
            WITH wake AS (
                SELECT w.id, w.channel_id
                FROM @extschema@.channel_wake AS w
                WHERE w.wake_at <= v_now
                ORDER BY w.wake_at, w.id
                LIMIT 1
                FOR UPDATE SKIP LOCKED
            ),

            served AS (
                SELECT c.id, c.name, c.max_attempts, c.max_concurrency, c.num_locked, c.wait_at, c.next_at
                FROM @extschema@.channel AS c
                WHERE
                    c.id = (SELECT k.channel_id FROM wake AS k)
                    AND c.wait_at IS NOT NULL
                    AND (c.max_concurrency IS NULL OR c.num_locked < c.max_concurrency)
                    AND c.release_interval_ms = 0
                    AND NOT c.is_paused
                FOR NO KEY UPDATE SKIP LOCKED
            ),

            head AS (
                SELECT q.id, q.dequeue_at, q.is_locked
                FROM @extschema@.message AS q
                WHERE
                    q.channel_id = (SELECT o.id FROM served AS o)
                    AND q.dequeue_at <= v_now
                ORDER BY q.dequeue_at, q.id
                LIMIT 1
                FOR UPDATE OF q SKIP LOCKED
            )

            UPDATE @extschema@.message AS m
            SET
                dequeue_at = v_now + p_lock_ms,
                is_locked = TRUE,
                is_counted = (SELECT o.max_concurrency IS NOT NULL FROM served AS o),
                num_attempts = m.num_attempts + 1,
                attempt_log = CASE
                    WHEN m.is_locked THEN
                        @extschema@._attempt_log_append(
                            m.attempt_log, m.num_attempts, v_now, 'lock expired'
                        )
                    ELSE m.attempt_log
                END
            WHERE
                m.id = (SELECT h.id FROM head AS h)
                -- An expired lock due for the dead letters: not here.
                AND NOT (
                    m.is_locked AND m.num_attempts >= (SELECT o.max_attempts FROM served AS o)
                ) IS TRUE
            RETURNING
                m.id, m.content, m.state, m.num_attempts,
                (SELECT h.dequeue_at FROM head AS h),
                (SELECT h.is_locked FROM head AS h),
                (SELECT o.name FROM served AS o),
                (SELECT o.max_concurrency FROM served AS o),
                (SELECT o.num_locked FROM served AS o),
                (SELECT o.wait_at FROM served AS o),
                (SELECT o.next_at FROM served AS o),
                m.channel_id,
                EXISTS (
                    SELECT 1
                    FROM @extschema@.message AS q
                    WHERE
                        q.channel_id = m.channel_id
                        AND q.dequeue_at <= v_now
                        AND q.id <> m.id
                )
            INTO id, content, state, num_attempts, dequeue_at, is_recovered,
                channel, v_max_concurrency, v_locked, v_was_wait, v_was_next, v_channel_id, v_more;
        END IF;
        IF id IS NOT NULL THEN
            -- Its next place, as the general way's step 5 gives it: at
            -- max_concurrency now, its first lock's expiry; with nothing
            -- deliverable left, waiting, with the guard held exclusively and
            -- a fresh probe.  (The same decisions as step 5, written here
            -- again rather than called: a PL/pgSQL helper measured +6% on
            -- this path's dequeue.)
            -- A channel that was alone (no other eligible channel, no other
            -- wake-up due) stays in the rotation instead: while it is the
            -- only one, the fast path serves it without writing its row, and
            -- its producers leave no wake-ups.
            v_wait := NULL;
            v_next := v_now;
            IF v_max_concurrency IS NOT NULL AND NOT is_recovered THEN
                v_locked := v_locked + 1;
            END IF;
            IF v_locked >= v_max_concurrency THEN
                -- Now at max_concurrency: wait for the first lock to expire
                -- (or a complete to free a slot), as in step 5.
                SELECT m.dequeue_at INTO v_head
                FROM @extschema@.message AS m
                WHERE m.channel_id = v_channel_id AND m.is_locked AND m.is_counted
                ORDER BY m.dequeue_at, m.id
                LIMIT 1;
                v_next := GREATEST(v_now, v_head);
            ELSIF NOT v_more
                AND NOT (pg_catalog.cardinality(v_fronts) + pg_catalog.cardinality(v_wakes) = 1)
                AND pg_catalog.current_setting('transaction_isolation') = 'read committed'
                AND @extschema@._channel_guard_try_exclusive(channel) THEN
                SELECT m.dequeue_at INTO v_head
                FROM @extschema@.message AS m
                WHERE m.channel_id = v_channel_id
                ORDER BY m.dequeue_at, m.id
                LIMIT 1;
                IF v_head > v_now THEN
                    v_wait := v_head;
                    v_next := v_head;
                END IF;
            END IF;
            -- A channel woken from waiting that goes back to waiting keeps
            -- its place as it is when that is still
            -- true: it was waiting from wait_at, no later than its new head,
            -- with its turn (next_at, in the future) no later than that.
            -- Producers then go on leaving wake-ups for messages before
            -- wait_at, and at next_at a consumer finds what came after (or
            -- nothing, and sends it to wait until its head then).  So a
            -- channel that gets one message at a time, each taken before the
            -- next arrives, is written about once per lock period, not once
            -- per message.  A channel with max_concurrency has only its count
            -- written (no indexed column changes: a HOT update); the row of
            -- one without is not written at all.  (Its last_served_at stays
            -- older: only a release interval reads it, and this way serves no
            -- channel with one.)
            v_stays := COALESCE(
                v_wait IS NOT NULL
                AND v_was_next > v_now
                AND v_was_next <= v_was_wait
                AND v_was_wait <= v_wait,
                FALSE
            );
            -- The channel's pending wake-ups go with this write (those no
            -- other transaction holds; SKIP LOCKED, so this never waits): in
            -- the rotation it needs none, and waiting, its wait_at is its
            -- first message.  Left behind, they would send later calls to a
            -- channel that has been served another way.
            WITH applied AS (
                DELETE FROM @extschema@.channel_wake AS w
                WHERE w.id = ANY(ARRAY(
                    SELECT x.id
                    FROM @extschema@.channel_wake AS x
                    WHERE x.channel_id = v_channel_id
                    FOR UPDATE SKIP LOCKED
                ))
            )

            UPDATE @extschema@.channel AS c
            SET
                next_at = CASE WHEN v_stays THEN c.next_at ELSE v_next END,
                turn = CASE
                    WHEN v_stays THEN c.turn
                    ELSE pg_catalog.nextval('@extschema@.channel_turn_seq')
                END,
                wait_at = CASE WHEN v_stays THEN c.wait_at ELSE v_wait END,
                last_served_at = CASE WHEN v_stays THEN c.last_served_at ELSE v_now END,
                num_locked = v_locked
            WHERE c.id = v_channel_id AND NOT (v_stays AND v_max_concurrency IS NULL);
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;

    RETURN QUERY
    SELECT g.id, g.channel, g.content, g.state, g.num_attempts, g.dequeue_at, g.is_recovered
    FROM @extschema@._message_dequeue_general(
        p_lock_ms, v_limit, p_channel, v_now, v_due IS FALSE
    ) AS g;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_dequeue(bigint, integer, text) IS
'Deliver up to p_limit ready messages (default 1), channels served round-robin within their limits, each locked for p_lock_ms. Expired locks are recovered here (is_recovered). num_attempts is the fencing token for complete, defer and heartbeat. Returns no rows when nothing is ready.';

REVOKE ALL ON FUNCTION @extschema@.message_dequeue(bigint, integer, text) FROM PUBLIC;
