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
-- The delivery (doc/dequeue-design.md), every step a bounded number of
-- index probes:
--   1. enter the epoch (the take writes lock expiries into message_due_ix)
--      and read the clock;
--   2. one statement: the marks, and whether a schedule or a message of
--      message_due_ix is due (one probe each, from the due mark);
--   3. only when something is due: up to 4 periodic messages
--      (_schedule_run) and up to 8 due messages promoted (_message_promote:
--      schedules, retries, recovered locks, dead letters, admission);
--   4. the take: the first p_limit turns of the round order from the
--      position mark (or of p_channel's turns), FOR UPDATE SKIP LOCKED; each
--      turn delivers its channel's first message in (dequeue_at, id) order
--      (an early message's, when the channel has one that sorts first: the
--      turn's holder takes the early one's later turn), in one statement.
--      A batch of N is N deliveries shared round-robin among the channels at
--      the front, and comes back in that order;
--   5. only when needed: an admitted message of a channel with a release
--      interval admits the next one (_channel_admit); every 16th message
--      taken tries to raise the marks (_marks_raise), if the call's
--      transaction wrote nothing before it.
-- In the common case (channels without limits, nothing due) that is three
-- statements and no write but the messages taken.
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
    v_limit integer := COALESCE(p_limit, 1);
    -- Evaluated once, not once per message taken.
    v_caller pg_catalog.regrole := @extschema@._caller_role();
    v_channel_id bigint := @extschema@._channel_id(p_channel);
    v_bound bigint;
    v_now bigint;
    v_mark bigint;
    v_due_mark bigint;
    v_schedule_due boolean;
    v_due boolean;
    v_may_raise boolean := pg_catalog.pg_current_xact_id_if_assigned() IS NULL;
    v_min_taken bigint;
    v_ids bigint[];
    v_old_at bigint[];
    v_old_locked boolean[];
    v_out @extschema@.delivery[];
    v_admitted bigint[];
    v_raise boolean;
    v_channel record;
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

    -- 1, 2.
    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    SELECT k.mark, k.due_mark, s.is_due, d.is_due
    INTO v_mark, v_due_mark, v_schedule_due, v_due
    FROM
        (
            SELECT
                pg_catalog.pg_sequence_last_value('@extschema@.position_mark_seq') AS mark,
                pg_catalog.pg_sequence_last_value('@extschema@.due_mark_seq') AS due_mark
        ) AS k,
        -- (Sub-selects of LATERAL: the due mark is a parameter of their
        -- index scan, so the range starts at the mark whatever the plan.)
        LATERAL (
            SELECT EXISTS (SELECT 1 FROM @extschema@.schedule AS sc WHERE sc.next_at <= v_now) AS is_due
        ) AS s,
        LATERAL (
            SELECT EXISTS (
                SELECT 1
                FROM @extschema@.message AS m
                WHERE
                    GREATEST(m.dequeue_at, m.created_at) >= k.due_mark
                    AND GREATEST(m.dequeue_at, m.created_at) <= v_now
                    AND m.position IS NULL AND NOT m.is_held
            ) AS is_due
        ) AS d;

    -- 3.
    IF v_schedule_due THEN
        PERFORM @extschema@._schedule_run(v_now, 4);
    END IF;
    IF v_due OR v_schedule_due THEN
        PERFORM @extschema@._message_promote(v_now, v_due_mark, v_bound, 8);
    END IF;

    -- 4. The one statement that takes messages.  A ready message's position
    -- is its channel's turn in the round order; a turn delivers the
    -- channel's first ready message in (dequeue_at, id) order, which is the
    -- turn's holder unless the channel has an early message (one placed at
    -- the back although it sorts before others: message.is_early) that
    -- sorts before it.  So:
    --   head    the first p_limit turns from the position mark (or of
    --           p_channel), locked as read (SKIP LOCKED: another consumer's
    --           take);
    --   early   for each channel of the head, as many of its early
    --           messages as it has turns here (message_early_ix: none, in
    --           the common case, after one probe);
    --   ranked  per channel, the holders in turn order, each early one
    --           before the first holder it sorts before: the first k (k
    --           turns) are delivered, in the turns in order; holders beyond
    --           them take the turns the delivered early ones held, and become
    --           early themselves;
    --   moved   the holders that gave their turns away;
    -- and then the deliveries are taken by primary key (next statement).
    -- Of the head's two legs, the one p_channel does not ask for is not
    -- executed.
    WITH head AS MATERIALIZED (
        SELECT a.*
        FROM (
            SELECT r.id, r.channel_id, r.dequeue_at, r.is_locked, r.position, r.is_early
            FROM @extschema@.message AS r
            WHERE p_channel IS NULL AND r.position >= v_mark
            ORDER BY r.position, r.dequeue_at, r.id
            LIMIT v_limit
            FOR UPDATE SKIP LOCKED
        ) AS a
        UNION ALL
        SELECT b.*
        FROM (
            SELECT r.id, r.channel_id, r.dequeue_at, r.is_locked, r.position, r.is_early
            FROM @extschema@.message AS r
            WHERE p_channel IS NOT NULL AND r.channel_id = v_channel_id AND r.position >= v_mark
                AND r.channel = p_channel
            ORDER BY r.position NULLS FIRST, r.dequeue_at, r.id
            LIMIT v_limit
            FOR UPDATE SKIP LOCKED
        ) AS b
    ),

    early AS MATERIALIZED (
        SELECT e.*
        FROM (
            SELECT h.channel_id, pg_catalog.count(*) AS k
            FROM head AS h
            GROUP BY h.channel_id
        ) AS c
        CROSS JOIN LATERAL (
            SELECT x.id, x.channel_id, x.dequeue_at, x.is_locked, x.position
            FROM @extschema@.message AS x
            WHERE x.channel_id = c.channel_id AND x.is_early AND x.position IS NOT NULL
            ORDER BY x.dequeue_at, x.id
            LIMIT c.k
            FOR UPDATE SKIP LOCKED
        ) AS e
    ),

    -- The candidates of each channel: its turns' holders that are not
    -- early, in turn order (slot), and its early messages (holders or not),
    -- each before the first of those that it sorts before.  A turn delivers
    -- the first candidate: its holder, or an early message that sorts
    -- before it.
    holders AS MATERIALIZED (
        SELECT
            h.*,
            pg_catalog.row_number() OVER (PARTITION BY h.channel_id, h.is_early ORDER BY h.position) AS slot,
            pg_catalog.row_number() OVER (PARTITION BY h.channel_id ORDER BY h.position) AS turn
        FROM head AS h
    ),

    ranked AS MATERIALIZED (
        SELECT
            u.*,
            pg_catalog.row_number() OVER (
                PARTITION BY u.channel_id ORDER BY u.slot, u.is_early DESC, u.dequeue_at, u.id
            ) AS rank,
            pg_catalog.count(u.turn) OVER (PARTITION BY u.channel_id) AS turns
        FROM (
            SELECT
                c.id, c.channel_id, c.dequeue_at, c.is_locked, c.position, c.is_early, c.turn,
                CASE WHEN NOT c.is_early THEN c.slot ELSE COALESCE((
                    SELECT pg_catalog.min(h.slot)
                    FROM holders AS h
                    WHERE h.channel_id = c.channel_id AND NOT h.is_early AND (h.dequeue_at, h.id) > (c.dequeue_at, c.id)
                ), 9223372036854775807) END AS slot
            FROM (
                SELECT h.id, h.channel_id, h.dequeue_at, h.is_locked, h.position, h.is_early, h.turn, h.slot
                FROM holders AS h
                UNION ALL
                SELECT e.id, e.channel_id, e.dequeue_at, e.is_locked, e.position, TRUE, NULL, NULL
                FROM early AS e
                WHERE e.id <> ALL(ARRAY(SELECT h.id FROM head AS h))
            ) AS c
        ) AS u
    ),

    -- Delivered: the first k of a channel, each in its channel's k-th turn:
    -- a holder whose rank is its own turn's keeps it (the common case, read
    -- without a look at the others: CASE evaluates the sub-select only for
    -- the others).
    delivered AS (
        SELECT
            d.id, d.dequeue_at, d.is_locked,
            CASE
                WHEN d.turn = d.rank THEN d.position
                ELSE (
                    SELECT t.position FROM ranked AS t
                    WHERE t.channel_id = d.channel_id AND t.turn = d.rank
                )
            END AS turn
        FROM ranked AS d
        WHERE d.rank <= d.turns
    ),

    -- Holders beyond them take the turns of the delivered early ones.
    moves AS (
        SELECT l.id, f.position
        FROM (
            SELECT r.id, r.channel_id, pg_catalog.row_number() OVER (PARTITION BY r.channel_id ORDER BY r.rank) AS j
            FROM ranked AS r
            WHERE r.turn IS NOT NULL AND r.rank > r.turns
        ) AS l
        INNER JOIN (
            SELECT r.channel_id, r.position, pg_catalog.row_number() OVER (PARTITION BY r.channel_id ORDER BY r.position) AS j
            FROM ranked AS r
            WHERE r.turn IS NULL AND r.rank <= r.turns
        ) AS f ON f.channel_id = l.channel_id AND f.j = l.j
    ),

    moved AS (
        UPDATE @extschema@.message AS m
        SET position = v.position, is_early = TRUE
        FROM moves AS v
        WHERE m.id = v.id AND m.id = ANY(ARRAY(SELECT v2.id FROM moves AS v2))
    )

    SELECT
        pg_catalog.array_agg(d.id ORDER BY d.turn),
        pg_catalog.array_agg(d.dequeue_at ORDER BY d.turn),
        pg_catalog.array_agg(d.is_locked ORDER BY d.turn),
        pg_catalog.min(d.turn),
        pg_catalog.bool_or(d.id % 16 = 0 OR d.turn >= v_mark + 16 * 1048576)
    INTO v_ids, v_old_at, v_old_locked, v_min_taken, v_raise
    FROM delivered AS d;

    -- The deliveries, locked and counted.  By primary key only ("= ANY": an
    -- index condition by shape, no join to walk), in turn order
    -- (array_position: the index of the id in the turn-ordered array).
    WITH taken AS (
        UPDATE @extschema@.message AS m
        SET
            position = NULL,
            is_early = FALSE,
            dequeue_at = v_now + p_lock_ms,
            is_locked = TRUE,
            locked_by = v_caller,
            num_attempts = m.num_attempts + 1,
            -- An expired lock was a failed delivery.
            num_failures = m.num_failures + CASE WHEN m.is_locked THEN 1 ELSE 0 END,
            attempt_log = CASE
                WHEN m.is_locked THEN
                    @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, v_now, 'lock expired')
                ELSE m.attempt_log
            END
        WHERE m.id = ANY(v_ids)
        RETURNING
            m.id, m.channel, m.content, m.state, m.num_attempts, m.channel_id, m.is_admitted,
            pg_catalog.array_position(v_ids, m.id) AS k
    )

    SELECT
        pg_catalog.array_agg(
            ROW(t.id, t.channel, t.content, t.state, t.num_attempts, v_old_at[t.k], v_old_locked[t.k])::@extschema@.delivery
            ORDER BY t.k
        ),
        pg_catalog.array_agg(t.channel_id) FILTER (WHERE t.is_admitted)
    INTO v_out, v_admitted
    FROM taken AS t;

    IF v_admitted IS NOT NULL THEN
        FOR v_channel IN
            SELECT c.id, pg_catalog.cardinality(pg_catalog.array_positions(v_admitted, c.id)) AS n
            FROM @extschema@.channel AS c
            WHERE c.id = ANY(v_admitted) AND c.release_interval_ms > 0
            ORDER BY c.id
        LOOP
            PERFORM @extschema@._channel_admit(v_channel.id, 0, v_channel.n, TRUE, v_now);
        END LOOP;
    END IF;
    -- Only a call whose transaction wrote nothing before it raises the
    -- marks: it knows every position it took (v_min_taken), which its own
    -- reads no longer see, and which a rollback or a crash would make ready
    -- again.
    IF v_raise AND v_may_raise THEN
        PERFORM @extschema@._marks_raise(v_now, v_min_taken);
    END IF;
    RETURN QUERY SELECT * FROM pg_catalog.unnest(v_out);
END;
$$;

COMMENT ON FUNCTION @extschema@.message_complete_dequeue(bigint[], integer[], bigint, integer, text) IS
'Complete the deliveries p_ids[k] with fencing tokens p_num_attempts[k] (each one refused raises a NOTICE, SQLSTATE 01LQ1), then deliver up to p_limit ready messages (default 1), channels served round-robin within their limits, each locked for p_lock_ms. Expired locks are recovered here (is_recovered). num_attempts is the fencing token for complete, defer and heartbeat. Returns no rows when nothing is ready.';

REVOKE ALL ON FUNCTION @extschema@.message_complete_dequeue(bigint[], integer[], bigint, integer, text) FROM PUBLIC;
