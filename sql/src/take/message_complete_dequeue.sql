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
--   1. one statement: the epoch, whose parity it holds shared (the take
--      writes lock expiries into message_due_ix), the marks, whether a
--      message of message_due_ix is due (one probe, from the due mark), and
--      whether it is the marks' turn (a call whose transaction wrote
--      nothing before it, when _marks_turn_deliveries (8) messages or more
--      were delivered since the last raise: marks_delivered_seq);
--   2. only when something is due or it is the marks' turn: the
--      housekeeping (_housekeeping), one entry point: up to 8 due messages
--      promoted (_message_promote: scheduled messages, schedules'
--      occurrences, retries, recovered locks, dead letters, admission),
--      then on the marks' turn their raise (_marks_raise), before the take
--      so that the transaction has taken no position its read would miss;
--   3. the take, one statement: the first p_limit turns of the round order
--      from the position mark (or p_channel's first turns), FOR UPDATE SKIP
--      LOCKED, locked and counted by primary key.  A batch of N is N
--      deliveries shared round-robin among the channels at the front, and
--      comes back in that order.  A turn delivers its channel's first
--      ready message in (dequeue_at, id) order: its holder, unless an early
--      message of its channel sorts before it; then the take takes nothing,
--      _message_turns_resolve gives the turns to the right messages, and
--      the take runs once more;
--   4. only when needed: a take of an admitted message in a channel with a
--      release interval starts the interval again, and leaves a wake at its
--      end, whose promotion admits the channel's next message
--      (_channel_release): the take admits nothing.
-- In the common case (channels without limits, nothing due) that is three
-- statements, the completion's included, and no write but the messages
-- completed and taken.
-- Parameters: p_ids, the deliveries to complete (NULL or empty: none);
--   p_num_attempts, their fencing tokens, p_num_attempts[k] for p_ids[k];
--   p_lock_ms, how long each new delivery's lock lasts (ms, at most
--   _max_duration_ms); p_limit, at most how many messages to deliver (1 to
--   1000; NULL: 1); p_channel, deliver only from this channel (NULL: any).
-- Returns: one delivery row per message taken, in turn order: its id,
--   channel, content, state, num_attempts (the fencing token), dequeue_at
--   before this delivery, is_recovered (an expired lock taken again) and
--   headers (the producer's);
--   no rows when nothing is ready.
-- Calls: _caller_role, _channel_id, _max_duration_ms, _check_lock_ms,
--   _check_channel_name, _message_complete_set, _epoch_hold (inlined),
--   _clock_ms, _marks_turn_deliveries (a constant), _housekeeping,
--   _attempt_log_append, _channel_release_try_lock, _message_turns_resolve,
--   _channel_release, _channel_claim (a turn whose holder must claim).
-- Tables: reads position_bound_seq, position_mark_seq, due_mark_seq,
--   messages_delivered_seq, marks_delivered_seq (their last values: the
--   epoch, the marks, and the deliveries since the last raise), message (message_due_ix, from the due
--   mark: whether one is due; message_ready_ix, from the position mark, or
--   message_channel_ix, p_channel's first turns: the head; message_early_ix:
--   one probe per turn); writes message (the taken ones, by message_pkey),
--   messages_delivered_seq (nextval) (what the callees read and write:
--   completions, the housekeeping, admissions).
-- Locks: the head's message rows FOR UPDATE OF r SKIP LOCKED, until the
--   transaction ends, which it updates (takes), but for an admitted one
--   whose channel's release lock it could not have (left for a later
--   call).  Its callees', in the order taken: the
--   completions' (_message_complete_set: the channel row locks, 1819111683,
--   of the channels with limits or max_size, in key order, then the
--   completed rows); the epoch's parity (1819111690) shared until the
--   transaction ends (_epoch_hold; _epoch_enter in the housekeeping);
--   _housekeeping's, which only try or skip (_message_promote's: the due
--   messages, a schedule's row and a quota row FOR UPDATE SKIP LOCKED, the
--   channel guard 1819111681 and the channel row lock 1819111683 tried;
--   then _marks_raise's: (1819111690, 2) and the previous parity, tried);
--   _message_turns_resolve's early messages FOR UPDATE SKIP LOCKED; the
--   channel row lock (1819111683) tried, until the transaction ends, for an
--   admitted message of a channel with a release interval
--   (_channel_release_try_lock), then its channel row, by step 4's update
--   (_channel_release).  The take skips what is locked and only tries its
--   advisory locks; step 4 writes under the row lock the take holds.
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
    v_may_raise boolean := pg_catalog.pg_current_xact_id_if_assigned() IS NULL;
    v_now bigint;
    v_mark bigint;
    -- Where the head starts: the position mark, then past a retake's turns.
    v_from bigint;
    v_due_mark bigint;
    v_due boolean;
    v_raise boolean;
    v_is_resolved boolean := FALSE;
    v_is_passed boolean;
    v_turns @extschema@._turn[];
    v_out @extschema@.delivery[];
    v_admitted bigint[];
    v_delivery @extschema@.delivery;
    -- (A retake's, after turns a claim refused: no initialisers, so that a
    -- call that retakes nothing evaluates no more expressions.)
    v_tries integer;
    v_skip bigint[];
    v_out_before @extschema@.delivery[];
    v_admitted_before bigint[];
BEGIN
    -- One expression for valid input; the checks say what is wrong.
    IF p_lock_ms IS NULL OR p_lock_ms NOT BETWEEN 1 AND @extschema@._max_duration_ms()
        OR pg_catalog.length(p_channel) NOT BETWEEN 1 AND 255 OR v_limit NOT BETWEEN 1 AND 1000 THEN
        PERFORM @extschema@._check_lock_ms(p_lock_ms);
        IF p_channel IS NOT NULL THEN
            PERFORM @extschema@._check_channel_name(p_channel);
        END IF;
        RAISE EXCEPTION 'lonnymq: p_limit must be between 1 and 1000, got %', v_limit
            USING ERRCODE = '22023';
    END IF;
    IF p_ids IS NOT NULL OR p_num_attempts IS NOT NULL THEN
        PERFORM @extschema@._message_complete_set(COALESCE(p_ids, '{}'), COALESCE(p_num_attempts, '{}'), v_caller, TRUE);
    END IF;

    -- 1.  k is one row whose columns are computed in order: the epoch's
    -- parity is held before the clock is read, so that a lock's expiry
    -- written with this clock is above the due mark (a subquery with
    -- volatile columns is never flattened into its caller).
    -- (Sub-selects of k: the due mark is a parameter of their index scan,
    -- so the range starts at the mark whatever the plan.)
    SELECT
        k.now, k.mark, k.mark, k.due_mark,
        -- The marks' turn: 8 messages or more delivered since the last
        -- raise (none: the marks would not move, and idle pollers write
        -- nothing).
        v_may_raise AND pg_catalog.pg_sequence_last_value('@extschema@.messages_delivered_seq')
            - pg_catalog.pg_sequence_last_value('@extschema@.marks_delivered_seq') >= @extschema@._marks_turn_deliveries(),
        EXISTS (
            SELECT 1
            FROM @extschema@.message AS m
            WHERE
                GREATEST(m.dequeue_at, m.created_at) >= k.due_mark AND GREATEST(m.dequeue_at, m.created_at) <= k.now
                AND m.position IS NULL AND NOT m.is_held
        )
    INTO v_now, v_mark, v_from, v_due_mark, v_raise, v_due
    FROM (
        SELECT
            @extschema@._epoch_hold(pg_catalog.pg_sequence_last_value('@extschema@.position_bound_seq')) AS in_epoch,
            @extschema@._clock_ms() AS now,
            pg_catalog.pg_sequence_last_value('@extschema@.position_mark_seq') AS mark,
            pg_catalog.pg_sequence_last_value('@extschema@.due_mark_seq') AS due_mark
    ) AS k;

    -- 2.  (A promotion's positions are checked against the bound by its
    -- own _epoch_enter.)
    IF v_due OR v_raise THEN
        PERFORM @extschema@._housekeeping(v_now, v_due_mark, 8, v_raise, CASE WHEN p_channel IS NULL THEN v_limit ELSE 0 END);
    END IF;

    -- 3.  Of the head's two legs, the one p_channel does not ask for is not
    -- executed.  The deliveries are taken by primary key only ("= ANY": an
    -- index condition by shape, no join whose plan could walk
    -- message_pkey).
    LOOP
        WITH head AS MATERIALIZED (
            SELECT a.*
            FROM (
                SELECT
                    r.id, r.channel_id, r.dequeue_at, r.is_locked, r.position,
                    r.is_limited AND NOT r.is_admitted AS must_claim
                FROM @extschema@.message AS r
                WHERE p_channel IS NULL AND v_turns IS NULL AND r.position >= v_from AND (v_skip IS NULL OR r.id <> ALL(v_skip))
                ORDER BY r.position, r.dequeue_at, r.id
                LIMIT v_limit
                FOR UPDATE OF r SKIP LOCKED
            ) AS a
            UNION ALL
            SELECT b.*
            FROM (
                SELECT
                    r.id, r.channel_id, r.dequeue_at, r.is_locked, r.position,
                    r.is_limited AND NOT r.is_admitted AS must_claim
                FROM @extschema@.message AS r
                WHERE
                    p_channel IS NOT NULL AND v_turns IS NULL AND r.channel_id = v_channel_id
                    AND r.position >= v_from AND r.channel = p_channel AND (v_skip IS NULL OR r.id <> ALL(v_skip))
                ORDER BY r.position NULLS FIRST, r.dequeue_at, r.id
                LIMIT v_limit
                FOR UPDATE OF r SKIP LOCKED
            ) AS b
        ),

        -- The turns in order (one row): the take finds its messages by
        -- primary key ("= ANY": an index condition by shape, no join whose
        -- plan could walk message_pkey), and the k-th turn is what the k-th
        -- delivery reports.  Once resolved (_message_turns_resolve), the
        -- turns are those it gave, already locked, and the head is not read
        -- again.
        turns AS MATERIALIZED (
            SELECT
                COALESCE(
                    pg_catalog.array_agg(ROW(h.id, h.channel_id, h.dequeue_at, h.is_locked, h.position)::@extschema@._turn),
                    v_turns
                ) AS turns,
                COALESCE(pg_catalog.array_agg(h.id), ARRAY(SELECT r.id FROM pg_catalog.unnest(v_turns) AS r)) AS ids,
                -- Whether an early message of a turn's channel sorts before
                -- its holder (message_early_ix: one probe per turn; every
                -- ready message lies at or above the position mark, a test
                -- of each entry, which passes those taken since).
                COALESCE(pg_catalog.bool_or(EXISTS (
                    SELECT 1 FROM @extschema@.message AS x
                    WHERE
                        x.channel_id = h.channel_id AND x.is_early AND x.position >= v_mark
                        AND (x.dequeue_at, x.id) < (h.dequeue_at, h.id)
                )), FALSE) AS is_passed
            FROM head AS h
            -- The claim of a turn whose holder must claim: once per turn
            -- (the head is materialized), on the version it locked, in one
            -- place in the plan.  A turn whose claim was refused is not
            -- taken.
            WHERE CASE WHEN h.must_claim THEN @extschema@._channel_claim(h.id, h.channel_id, h.dequeue_at) ELSE TRUE END
        ),

        taken AS (
            UPDATE @extschema@.message AS m
            SET
                position = NULL, is_early = FALSE, is_locked = TRUE, locked_by = v_caller,
                -- (A claim, counted by the head, is held while locked.)
                is_admitted = m.is_admitted OR m.is_limited,
                num_attempts = m.num_attempts + 1,
                -- The clock when the row is taken, after another call's
                -- promotion of it committed: a lock never starts before
                -- its message became due.
                dequeue_at = @extschema@._clock_ms() + p_lock_ms,
                -- An expired lock was a failed delivery.
                num_failures = m.num_failures + CASE WHEN m.is_locked THEN 1 ELSE 0 END,
                attempt_log = CASE
                    WHEN m.is_locked THEN
                        @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, v_now, 'lock expired')
                    ELSE m.attempt_log
                END
            FROM turns AS u
            WHERE
                m.id = ANY(u.ids) AND NOT u.is_passed
                -- A delivery in a channel with a release interval starts
                -- the interval again (step 4), under the channel's row
                -- lock, tried: else the message is left for a later call.
                AND (NOT m.is_admitted OR m.is_limited OR @extschema@._channel_release_try_lock(m.channel_id))
            RETURNING
                m.id, m.channel, m.content, m.state, m.num_attempts, m.channel_id, m.headers,
                m.is_admitted AND NOT m.is_limited AS is_admitted,
                pg_catalog.array_position(u.ids, m.id) AS k,
                -- (Counted, lonnymq_messages_delivered_total: a sequence, no row.)
                pg_catalog.nextval('@extschema@.messages_delivered_seq') AS delivered
        )

        SELECT u.turns, u.is_passed, d.deliveries, d.admitted
        INTO v_turns, v_is_passed, v_out, v_admitted
        FROM turns AS u
        CROSS JOIN LATERAL (
            SELECT
                pg_catalog.array_agg(
                    ROW(
                        t.id, t.channel, t.content, t.state, t.num_attempts, (u.turns[t.k]).dequeue_at,
                        (u.turns[t.k]).is_locked, t.headers
                    )::@extschema@.delivery
                    ORDER BY t.k
                ) AS deliveries,
                pg_catalog.array_agg(t.channel_id) FILTER (WHERE t.is_admitted) AS admitted
            FROM taken AS t
        ) AS d;
        -- (One expression on the common path: nothing refused.)
        EXIT WHEN (NOT v_is_passed OR v_is_resolved)
            AND COALESCE(pg_catalog.current_setting('lonnymq.refused', TRUE), '') = '';
        IF v_is_passed AND NOT v_is_resolved THEN
            v_turns := @extschema@._message_turns_resolve(v_turns);
            v_is_resolved := TRUE;
        ELSE
            -- Turns whose claims were refused (_channel_claim: a full
            -- channel's, held, or a busy row lock's) are taken again by the
            -- head, past them and from the last turn taken (not across the
            -- entries of what it took again), up to 8 times a call.  The
            -- list is cleared as it is read: a call leaves none to the next
            -- call of its transaction.
            v_skip := COALESCE(v_skip, '{}') || pg_catalog.current_setting('lonnymq.refused')::bigint[];
            PERFORM pg_catalog.set_config('lonnymq.refused', '', TRUE);
            v_from := GREATEST(v_from, (SELECT pg_catalog.max((t).position) FROM pg_catalog.unnest(v_turns) AS t));
            v_tries := COALESCE(v_tries, 0) + 1;
            v_out_before := v_out_before || v_out;
            v_admitted_before := v_admitted_before || v_admitted;
            v_limit := v_limit - COALESCE(pg_catalog.cardinality(v_out), 0);
            v_out := NULL;
            v_admitted := NULL;
            EXIT WHEN v_limit <= 0 OR v_tries > 8;
            v_turns := NULL;
            v_is_resolved := FALSE;
        END IF;
    END LOOP;

    -- 4.  A delivery in a channel with a release interval starts the
    -- interval again (its row lock is held already, from the take), and
    -- leaves a wake at its end, which admits the next message
    -- (_channel_release).  (The clock after the take: the interval never
    -- starts before a delivery's lock.  With the retakes': an expression
    -- each, as without them.)
    IF (v_admitted_before || v_admitted) IS NOT NULL THEN
        PERFORM @extschema@._channel_release(a.id, pg_catalog.count(*)::integer, @extschema@._clock_ms())
        FROM pg_catalog.unnest(v_admitted_before || v_admitted) AS a (id)
        GROUP BY a.id;
    END IF;
    FOREACH v_delivery IN ARRAY COALESCE(v_out_before || v_out, '{}') LOOP
        RETURN NEXT v_delivery;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_complete_dequeue(bigint[], integer[], bigint, integer, text) IS
'Complete the deliveries p_ids[k] with fencing tokens p_num_attempts[k] (each one refused raises a NOTICE, SQLSTATE 01LQ1), then deliver up to p_limit ready messages (default 1), channels served round-robin within their limits, each locked for p_lock_ms. Expired locks are recovered here (is_recovered). num_attempts is the fencing token for complete, defer and heartbeat. Returns no rows when nothing is ready.';

REVOKE ALL ON FUNCTION @extschema@.message_complete_dequeue(bigint[], integer[], bigint, integer, text) FROM PUBLIC;
