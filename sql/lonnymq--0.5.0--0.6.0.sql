-- lonnymq 0.5.0 -> 0.6.0 as released, without the statements that changed nothing (the
-- functions and comments it re-created as they were: tools/build_upgrade.py).
\echo Use "ALTER EXTENSION lonnymq UPDATE TO '0.6.0'" to load this file. \quit

ALTER TABLE @extschema@.message
ADD COLUMN is_counted boolean NOT NULL DEFAULT FALSE;

UPDATE @extschema@.message AS m
SET is_counted = TRUE
FROM @extschema@.channel AS c
WHERE
    c.id = m.channel_id
    AND c.max_concurrency IS NOT NULL
    AND m.is_locked;

DROP INDEX @extschema@.message_locked_ix;

CREATE INDEX message_locked_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE is_locked AND is_counted AND channel_id IS NOT NULL;

DROP FUNCTION @extschema@._message_take(
    bigint, bigint, bigint, integer, boolean, integer, boolean, text, bigint
);

CREATE OR REPLACE VIEW @extschema@.channel_stats AS
WITH clock AS (
    SELECT
        pg_catalog.floor(
            pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000
        )::bigint AS now_ms
)

SELECT
    c.name AS channel,
    n.due - n.expired AS ready,
    n.total - n.due - (n.locked - n.expired) AS scheduled,
    n.locked,
    d.dead,
    clock.now_ms - greatest(h.dequeue_at, h.created_at) AS oldest_ready_age_ms,
    c.is_paused,
    c.max_concurrency,
    c.max_size,
    c.release_interval_ms,
    c.max_attempts,
    c.backoff_base_ms,
    c.backoff_factor,
    c.backoff_max_ms,
    c.backoff_jitter,
    c.dedup_window_ms,
    c.retain_history,
    c.notify
FROM @extschema@.channel AS c
CROSS JOIN clock
CROSS JOIN
    LATERAL (
        SELECT
            pg_catalog.count(*) AS total,
            pg_catalog.count(*) FILTER (WHERE m.dequeue_at <= clock.now_ms) AS due,
            pg_catalog.count(*) FILTER (WHERE m.is_locked) AS locked,
            pg_catalog.count(*) FILTER (
                WHERE m.is_locked AND m.dequeue_at <= clock.now_ms
            ) AS expired
        FROM @extschema@.message AS m
        WHERE m.channel_id = c.id
    ) AS n
CROSS JOIN
    LATERAL (
        SELECT pg_catalog.count(*) AS dead
        FROM @extschema@.dead_letter AS dl
        WHERE dl.channel = c.name
    ) AS d
LEFT JOIN LATERAL (
    SELECT
        m.dequeue_at,
        m.created_at
    FROM @extschema@.message AS m
    WHERE
        m.channel_id = c.id
        AND m.dequeue_at <= clock.now_ms
        AND NOT m.is_locked
    ORDER BY m.dequeue_at, m.id
    LIMIT 1
) AS h ON TRUE;

COMMENT ON VIEW @extschema@.channel_stats IS
'Per channel: ready, scheduled, locked and dead messages, the age of the next ready message, the pause state and the configuration. Reads index ranges only.';

REVOKE ALL ON FUNCTION @extschema@._clock_ms() FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_channel_name(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_lock_ms(bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_token(bigint, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_shared(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_shared(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_exclusive(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_exclusive(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._attempt_log_append(jsonb, integer, bigint, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_access(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_key(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._dead_letter_requeued(@extschema@.channel, integer, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_lock(text, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_quota_take(bigint, integer, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_for_producer(text, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_wake(bigint, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_release(bigint, integer, boolean, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_nothing_ready(
    p_channel @extschema@.channel,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_head bigint;
BEGIN
    IF p_channel.num_locked >= p_channel.max_concurrency THEN
        SELECT m.dequeue_at INTO v_head
        FROM @extschema@.message AS m
        WHERE m.channel_id = p_channel.id AND m.is_locked AND m.is_counted
        ORDER BY m.dequeue_at, m.id
        LIMIT 1;
        -- Nothing locked at all although the counter says the channel is
        -- full: the counter is wrong; repair it rather than stall.
        UPDATE @extschema@.channel AS c
        SET
            num_locked = CASE WHEN v_head IS NULL THEN 0 ELSE c.num_locked END,
            next_at = COALESCE(v_head, p_now),
            turn = pg_catalog.nextval('@extschema@.channel_turn_seq')
        WHERE c.id = p_channel.id;
        RETURN;
    END IF;

    SELECT m.dequeue_at INTO v_head
    FROM @extschema@.message AS m
    WHERE m.channel_id = p_channel.id
    ORDER BY m.dequeue_at, m.id
    LIMIT 1;
    IF (v_head IS NULL OR v_head > p_now)
        AND pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        v_head := p_now;
    ELSIF v_head IS NULL OR v_head > p_now THEN
        IF @extschema@._channel_guard_try_exclusive(p_channel.name) THEN
            SELECT m.dequeue_at INTO v_head
            FROM @extschema@.message AS m
            WHERE m.channel_id = p_channel.id
            ORDER BY m.dequeue_at, m.id
            LIMIT 1;
        ELSE
            v_head := p_now;
        END IF;
    END IF;

    IF v_head IS NULL THEN
        UPDATE @extschema@.channel AS c
        SET
            next_at = NULL,
            turn = NULL,
            wait_at = 9223372036854775807
        WHERE c.id = p_channel.id;
    ELSIF v_head > p_now THEN
        UPDATE @extschema@.channel AS c
        SET
            next_at = GREATEST(
                v_head,
                COALESCE(c.last_served_at + c.release_interval_ms, v_head)
            ),
            turn = pg_catalog.nextval('@extschema@.channel_turn_seq'),
            wait_at = v_head
        WHERE c.id = p_channel.id;
    ELSE
        UPDATE @extschema@.channel AS c
        SET
            next_at = p_now,
            turn = pg_catalog.nextval('@extschema@.channel_turn_seq')
        WHERE c.id = p_channel.id;
    END IF;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@._channel_nothing_ready(@extschema@.channel, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._message_take(
    p_channel_id bigint,
    p_now bigint,
    p_lock_ms bigint,
    p_limit integer,
    p_expired_only boolean,
    p_max_attempts integer,
    p_bury boolean,
    p_channel text,
    p_window_ms bigint,
    p_counted boolean
)
RETURNS TABLE (
    id bigint,
    content bytea,
    state bytea,
    num_attempts integer,
    dequeue_at bigint,
    was_locked boolean,
    is_dead boolean
)
LANGUAGE plpgsql
VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_message record;
    v_cursor refcursor;
    v_want integer := p_limit;
    v_expired_only boolean := p_expired_only;
    v_dead integer := 0;
    v_pass integer;
BEGIN
    -- Rows are locked one by one as the cursor reaches them, then each is
    -- updated through its primary key.  (A single UPDATE ... FROM the locked
    -- rows would be planned, generically, for "LIMIT p_limit" rows of the
    -- whole channel, and can then choose a merge join that walks the
    -- message primary key from its start.)
    LOOP
        v_pass := 0;
        -- Two queries: the expired-only one names is_locked so that its
        -- generic plan can use the partial index message_locked_ix (a channel
        -- at max_concurrency counts every lock).
        IF v_expired_only THEN
            OPEN v_cursor FOR
            SELECT m.id, m.dequeue_at, m.is_locked, m.num_attempts
            FROM @extschema@.message AS m
            WHERE
                m.channel_id = p_channel_id
                AND m.is_locked
                AND m.is_counted
                AND m.dequeue_at <= p_now
            ORDER BY m.dequeue_at, m.id
            LIMIT v_want
            FOR UPDATE SKIP LOCKED;
        ELSE
            OPEN v_cursor FOR
            SELECT m.id, m.dequeue_at, m.is_locked, m.num_attempts
            FROM @extschema@.message AS m
            WHERE m.channel_id = p_channel_id AND m.dequeue_at <= p_now
            ORDER BY m.dequeue_at, m.id
            LIMIT v_want
            FOR UPDATE SKIP LOCKED;
        END IF;
        LOOP
            FETCH v_cursor INTO v_message;
            EXIT WHEN NOT FOUND;
            IF v_message.is_locked AND v_message.num_attempts >= p_max_attempts THEN
                CONTINUE WHEN NOT p_bury;
                PERFORM @extschema@._message_bury(
                    v_message.id, p_channel_id, p_channel, 'lock expired', p_now, p_window_ms
                );
                v_dead := v_dead + 1;
                v_pass := v_pass + 1;
                id := v_message.id;
                content := NULL;
                state := NULL;
                num_attempts := v_message.num_attempts;
                dequeue_at := v_message.dequeue_at;
                was_locked := TRUE;
                is_dead := TRUE;
                RETURN NEXT;
                CONTINUE;
            END IF;
            RETURN QUERY
            UPDATE @extschema@.message AS m
            SET
                dequeue_at = p_now + p_lock_ms,
                is_locked = TRUE,
                is_counted = p_counted,
                num_attempts = m.num_attempts + 1,
                attempt_log = CASE
                    WHEN m.is_locked THEN
                        @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, p_now, 'lock expired')
                    ELSE m.attempt_log
                END
            WHERE m.id = v_message.id
            RETURNING m.id, m.content, m.state, m.num_attempts, v_message.dequeue_at, v_message.is_locked, FALSE;
        END LOOP;
        CLOSE v_cursor;
        -- Replacements for the dead, within the bound.
        EXIT WHEN v_pass = 0 OR v_dead >= p_limit + 16;
        v_want := LEAST(v_pass, p_limit + 16 - v_dead);
        -- Each dead lock freed a place under max_concurrency: the
        -- replacements may be any deliverable message.
        v_expired_only := FALSE;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_take(
    bigint, bigint, bigint, integer, boolean, integer, boolean, text, bigint, boolean
) IS
'Internal: lock up to p_limit deliverable messages of a channel with one index range scan, SKIP LOCKED; expired locks past max_attempts go to the dead letters.';

REVOKE ALL ON FUNCTION @extschema@._message_take(
    bigint, bigint, bigint, integer, boolean, integer, boolean, text, bigint, boolean
) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._message_key_claim(bigint, text, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._message_key_release(bigint, text, bigint, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._message_bury(bigint, bigint, text, text, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._backoff_ms(@extschema@.channel, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._schedule_run(bigint, integer, OUT integer, OUT integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._access_functions(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._access_apply(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.grant_access(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.revoke_access(name, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._message_dequeue_general(
    p_lock_ms bigint,
    p_limit integer,
    p_channel text,
    p_now bigint,
    p_none_due boolean
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
AS $$
#variable_conflict use_column
DECLARE
    v_now bigint;
    v_limit integer := COALESCE(p_limit, 1);
    v_remaining integer;
    v_only bigint;
    v_wake record;
    v_next bigint;
    v_locked integer;
    v_head bigint;
    v_wait bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_gone integer;
    v_new integer;
    v_take_id bigint[];
    v_take_content bytea[];
    v_take_state bytea[];
    v_take_attempts integer[];
    v_take_dequeue_at bigint[];
    v_take_recovered boolean[];
    -- The channels visited, in rotation order, and what happened to each.
    v_n integer := 0;
    v_first integer;
    v_channels @extschema@.channel[] := '{}';
    v_seen bigint[] := '{}';
    v_cap integer[] := '{}';
    v_taken integer[] := '{}';
    v_fresh integer[] := '{}';
    v_dead integer[] := '{}';
    v_active boolean[] := '{}';
    v_live integer;
    v_share integer;
    v_extra integer;
    v_rank integer;
    v_want integer;
    v_got integer;
    v_changed boolean;
    v_busy bigint[];
    v_busy_id bigint;
    v_busy_name text;
    v_order integer[];
    i integer;
    -- The messages taken, returned in rotation order at the end.
    v_out_id bigint[] := '{}';
    v_out_pos integer[] := '{}';
    v_out_content bytea[] := '{}';
    v_out_state bytea[] := '{}';
    v_out_attempts integer[] := '{}';
    v_out_dequeue_at bigint[] := '{}';
    v_out_recovered boolean[] := '{}';
BEGIN
    v_now := p_now;

    -- 0. Due periodic messages.
    IF NOT p_none_due THEN
        PERFORM 1
        FROM @extschema@.schedule AS s
        WHERE s.next_at <= v_now
        ORDER BY s.next_at
        LIMIT 1;
        IF FOUND THEN
            PERFORM 1 FROM @extschema@._schedule_run(v_now, 4);
        END IF;
    END IF;

    -- (After the schedules: one may create the channel asked for.)
    IF p_channel IS NOT NULL THEN
        SELECT c.id INTO v_only
        FROM @extschema@.channel AS c
        WHERE c.name = p_channel;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;

    -- 1. Due wake-ups: a waiting channel got a message deliverable earlier
    -- than it was waiting for.  It joins the rotation at the back as of the
    -- wake-up's time (when that message became deliverable, never before it
    -- was created), not at the message's dequeue_at: after the channels
    -- served before then, ahead of those served since.  (So a due wake-up
    -- ranks against the rotation by wake_at, as message_dequeue's
    -- one-channel way ranks it.)
    IF NOT p_none_due THEN
        FOR v_wake IN
            SELECT
                w.id AS wake_id,
                w.wake_at,
                c.id AS channel_id,
                c.wait_at,
                c.next_at,
                c.max_concurrency,
                c.num_locked,
                c.last_served_at,
                c.release_interval_ms
            FROM @extschema@.channel_wake AS w
            INNER JOIN @extschema@.channel AS c ON c.id = w.channel_id
            WHERE w.wake_at <= v_now
            ORDER BY w.wake_at, w.id
            LIMIT 8
            FOR UPDATE OF w SKIP LOCKED
            FOR NO KEY UPDATE OF c SKIP LOCKED
        LOOP
            IF v_wake.wait_at IS NOT NULL THEN
                v_next := GREATEST(
                    v_wake.wake_at,
                    COALESCE(v_wake.last_served_at + v_wake.release_interval_ms, v_wake.wake_at)
                );
                IF v_wake.num_locked >= v_wake.max_concurrency AND v_wake.next_at IS NOT NULL THEN
                    v_next := v_wake.next_at;
                ELSIF v_wake.next_at IS NOT NULL THEN
                    v_next := LEAST(v_next, v_wake.next_at);
                END IF;
                UPDATE @extschema@.channel AS c
                SET
                    wait_at = NULL,
                    next_at = v_next,
                    turn = CASE
                        WHEN v_next IS DISTINCT FROM c.next_at
                            THEN pg_catalog.nextval('@extschema@.channel_turn_seq')
                        ELSE c.turn
                    END
                WHERE c.id = v_wake.channel_id;
            END IF;
            DELETE FROM @extschema@.channel_wake AS w WHERE w.id = v_wake.wake_id;
        END LOOP;
    END IF;

    v_remaining := v_limit;
    WHILE v_remaining > 0 AND v_n < v_limit + 16 LOOP
        -- 2. The front of the rotation that no other consumer is serving.
        v_first := v_n + 1;
        IF v_only IS NULL THEN
            FOR v_channel IN
                SELECT c.*
                FROM @extschema@.channel AS c
                WHERE c.next_at <= v_now AND c.id <> ALL(v_seen)
                ORDER BY c.next_at, c.turn
                LIMIT LEAST(v_remaining, v_limit + 16 - v_n)
                FOR NO KEY UPDATE SKIP LOCKED
            LOOP
                v_n := v_n + 1;
                v_channels := v_channels || v_channel;
                v_seen := v_seen || v_channel.id;
            END LOOP;
        ELSE
            SELECT c.* INTO v_channel
            FROM @extschema@.channel AS c
            WHERE c.id = v_only AND c.next_at <= v_now
            FOR NO KEY UPDATE SKIP LOCKED;
            IF FOUND THEN
                v_n := v_n + 1;
                v_channels := v_channels || v_channel;
                v_seen := v_seen || v_channel.id;
            END IF;
        END IF;
        EXIT WHEN v_n < v_first;

        FOR i IN v_first..v_n LOOP
            v_taken := v_taken || 0;
            v_fresh := v_fresh || 0;
            v_dead := v_dead || 0;
            v_active := v_active || TRUE;
            v_cap := v_cap || CASE
                WHEN v_channels[i].num_locked >= v_channels[i].max_concurrency THEN v_limit
                ELSE COALESCE(v_channels[i].max_concurrency - v_channels[i].num_locked, v_limit)
            END;
            IF v_channels[i].release_interval_ms > 0 THEN
                v_cap[i] := LEAST(v_cap[i], 1);
            END IF;
        END LOOP;

        -- 3. Share what is left among the live channels: equal shares, the
        -- remainder to the first ones in turn order; a channel that gives
        -- less than its share drops out and the rest is shared again.
        v_live := v_n - v_first + 1;
        LOOP
            EXIT WHEN v_live = 0 OR v_remaining = 0;
            v_share := v_remaining / v_live;
            v_extra := v_remaining % v_live;
            v_rank := 0;
            v_changed := FALSE;
            FOR i IN v_first..v_n LOOP
                CONTINUE WHEN NOT v_active[i];
                v_want := LEAST(v_cap[i], v_share + CASE WHEN v_rank < v_extra THEN 1 ELSE 0 END);
                v_rank := v_rank + 1;
                CONTINUE WHEN v_want <= 0;
                -- One statement per channel share; its rows are appended to
                -- the output arrays at once.
                SELECT
                    pg_catalog.count(*) FILTER (WHERE NOT t.is_dead),
                    pg_catalog.count(*) FILTER (WHERE t.is_dead),
                    pg_catalog.count(*) FILTER (WHERE NOT t.is_dead AND NOT t.was_locked),
                    pg_catalog.array_agg(t.id) FILTER (WHERE NOT t.is_dead),
                    pg_catalog.array_agg(t.content) FILTER (WHERE NOT t.is_dead),
                    pg_catalog.array_agg(t.state) FILTER (WHERE NOT t.is_dead),
                    pg_catalog.array_agg(t.num_attempts) FILTER (WHERE NOT t.is_dead),
                    pg_catalog.array_agg(t.dequeue_at) FILTER (WHERE NOT t.is_dead),
                    pg_catalog.array_agg(t.was_locked) FILTER (WHERE NOT t.is_dead)
                INTO
                    v_got, v_gone, v_new, v_take_id, v_take_content, v_take_state,
                    v_take_attempts, v_take_dequeue_at, v_take_recovered
                FROM @extschema@._message_take(
                    v_channels[i].id, v_now, p_lock_ms, v_want,
                    COALESCE(v_channels[i].num_locked >= v_channels[i].max_concurrency, FALSE),
                    v_channels[i].max_attempts, TRUE, v_channels[i].name, v_channels[i].dedup_window_ms,
                    v_channels[i].max_concurrency IS NOT NULL
                ) AS t;
                v_dead[i] := v_dead[i] + v_gone;
                v_fresh[i] := v_fresh[i] + v_new;
                IF v_got > 0 THEN
                    v_out_id := v_out_id || v_take_id;
                    v_out_pos := v_out_pos || pg_catalog.array_fill(i, ARRAY[v_got]);
                    v_out_content := v_out_content || v_take_content;
                    v_out_state := v_out_state || v_take_state;
                    v_out_attempts := v_out_attempts || v_take_attempts;
                    v_out_dequeue_at := v_out_dequeue_at || v_take_dequeue_at;
                    v_out_recovered := v_out_recovered || v_take_recovered;
                END IF;
                v_taken[i] := v_taken[i] + v_got;
                v_cap[i] := v_cap[i] - v_got;
                v_remaining := v_remaining - v_got;
                IF v_got < v_want OR v_cap[i] <= 0 THEN
                    v_active[i] := FALSE;
                    v_live := v_live - 1;
                    v_changed := TRUE;
                END IF;
                IF v_got > 0 THEN
                    v_changed := TRUE;
                END IF;
            END LOOP;
            EXIT WHEN NOT v_changed;
        END LOOP;

        EXIT WHEN v_only IS NOT NULL;
    END LOOP;

    -- 4. Every eligible channel is being served by another consumer right
    -- now.  An unconstrained channel has no count to keep: take more of its
    -- messages (SKIP LOCKED) without taking its turn.  The horizon is a
    -- second past v_now: a consumer that read the clock a moment after this
    -- one may already have committed its turn (next_at = its own clock), and
    -- its channel must not look empty to this call for that reason.  Only
    -- messages with dequeue_at <= v_now are taken, so nothing is delivered
    -- early.
    IF v_remaining > 0 THEN
        IF v_only IS NOT NULL THEN
            v_busy := ARRAY[v_only];
        ELSE
            -- The front of the rotation, and channels another consumer is
            -- waking up right now (their wake-up is due but locked).  One
            -- statement, so one snapshot: a consumer applying a wake-up moves
            -- its channel from the wake-ups into the rotation when it
            -- commits, and two statements could each miss it, one before
            -- that commit, one after.
            SELECT
                COALESCE(
                    (
                        SELECT pg_catalog.array_agg(b.id ORDER BY b.next_at, b.turn)
                        FROM (
                            SELECT c.id, c.next_at, c.turn
                            FROM @extschema@.channel AS c
                            WHERE c.next_at <= v_now + 1000
                            ORDER BY c.next_at, c.turn
                            LIMIT 8
                        ) AS b
                    ),
                    '{}'
                ) || ARRAY(
                    SELECT w.channel_id
                    FROM @extschema@.channel_wake AS w
                    WHERE w.wake_at <= v_now
                    ORDER BY w.wake_at, w.id
                    LIMIT 8
                )
            INTO v_busy;
        END IF;
        FOREACH v_busy_id IN ARRAY v_busy LOOP
            CONTINUE WHEN v_busy_id = ANY(v_seen);
            v_seen := v_seen || v_busy_id;
            -- The channel guard, shared: it does not conflict with the
            -- consumer serving the channel, but makes channel_set wait for
            -- this call, so that a new max_concurrency counts these locks
            -- too.  The row is read after the guard is taken.
            SELECT c.name INTO v_busy_name
            FROM @extschema@.channel AS c
            WHERE c.id = v_busy_id;
            CONTINUE WHEN NOT FOUND;
            CONTINUE WHEN NOT @extschema@._channel_guard_try_shared(v_busy_name);
            SELECT c.* INTO v_channel
            FROM @extschema@.channel AS c
            WHERE c.id = v_busy_id;
            CONTINUE WHEN NOT FOUND
                OR v_channel.is_paused
                OR v_channel.max_concurrency IS NOT NULL
                OR v_channel.release_interval_ms > 0;
            v_n := v_n + 1;
            v_channels := v_channels || v_channel;
            SELECT
                pg_catalog.count(*) FILTER (WHERE NOT t.is_dead),
                pg_catalog.array_agg(t.id) FILTER (WHERE NOT t.is_dead),
                pg_catalog.array_agg(t.content) FILTER (WHERE NOT t.is_dead),
                pg_catalog.array_agg(t.state) FILTER (WHERE NOT t.is_dead),
                pg_catalog.array_agg(t.num_attempts) FILTER (WHERE NOT t.is_dead),
                pg_catalog.array_agg(t.dequeue_at) FILTER (WHERE NOT t.is_dead),
                pg_catalog.array_agg(t.was_locked) FILTER (WHERE NOT t.is_dead)
            INTO
                v_got, v_take_id, v_take_content, v_take_state,
                v_take_attempts, v_take_dequeue_at, v_take_recovered
            FROM @extschema@._message_take(
                v_channel.id, v_now, p_lock_ms, v_remaining, FALSE,
                -- Dead letters only where no counter needs the row another
                -- consumer holds (max_size counts removals).
                v_channel.max_attempts, v_channel.max_size IS NULL, v_channel.name,
                v_channel.dedup_window_ms, v_channel.max_concurrency IS NOT NULL
            ) AS t;
            IF v_got > 0 THEN
                v_remaining := v_remaining - v_got;
                v_out_id := v_out_id || v_take_id;
                v_out_pos := v_out_pos || pg_catalog.array_fill(v_n, ARRAY[v_got]);
                v_out_content := v_out_content || v_take_content;
                v_out_state := v_out_state || v_take_state;
                v_out_attempts := v_out_attempts || v_take_attempts;
                v_out_dequeue_at := v_out_dequeue_at || v_take_dequeue_at;
                v_out_recovered := v_out_recovered || v_take_recovered;
            END IF;
            EXIT WHEN v_remaining = 0;
        END LOOP;
    END IF;

    -- 5. Write each channel this call locked, once, in the order of its last
    -- delivery in this batch, so that the rotation continues exactly as if
    -- the messages had been taken one at a time: the back of the rotation
    -- after its release interval; a channel now at its max_concurrency waits
    -- for a complete or for its first lock to expire.  (The channels this
    -- call locked are v_channels[1 .. length of v_taken]; busy channels
    -- served in step 4 come after them and are not written.)
    IF pg_catalog.cardinality(v_taken) <= 1 THEN
        v_order := ARRAY[1];
    ELSE
        SELECT pg_catalog.array_agg(k.i ORDER BY k.taken - 1, k.i) INTO v_order
        FROM ROWS FROM (pg_catalog.unnest(v_taken)) WITH ORDINALITY AS k (taken, i);
    END IF;
    FOREACH i IN ARRAY v_order LOOP
        CONTINUE WHEN i > pg_catalog.cardinality(v_taken);
        IF v_dead[i] > 0 AND v_taken[i] = 0 THEN
            -- Messages it held went to the dead letters: they were locked
            -- (num_locked) and held (num_removed).
            UPDATE @extschema@.channel AS c
            SET
                num_locked = CASE
                    WHEN c.max_concurrency IS NULL THEN c.num_locked
                    ELSE pg_catalog.int4larger(c.num_locked - v_dead[i], 0)
                END,
                num_removed = c.num_removed + CASE WHEN c.max_size IS NULL THEN 0 ELSE v_dead[i] END
            WHERE c.id = v_channels[i].id
            RETURNING c.* INTO v_channel;
            v_channels[i] := v_channel;
        END IF;
        IF v_taken[i] = 0 THEN
            PERFORM @extschema@._channel_nothing_ready(v_channels[i], v_now);
            CONTINUE;
        END IF;
        v_locked := v_channels[i].num_locked;
        IF v_channels[i].max_concurrency IS NOT NULL THEN
            v_locked := pg_catalog.int4larger(v_locked + v_fresh[i] - v_dead[i], 0);
        END IF;
        v_next := v_now + v_channels[i].release_interval_ms;
        v_wait := NULL;
        IF v_locked >= v_channels[i].max_concurrency THEN
            SELECT m.dequeue_at INTO v_head
            FROM @extschema@.message AS m
            WHERE m.channel_id = v_channels[i].id AND m.is_locked AND m.is_counted
            ORDER BY m.dequeue_at, m.id
            LIMIT 1;
            v_next := GREATEST(v_next, v_head);
        ELSIF p_channel IS NULL AND v_limit = 1 THEN
            -- Nothing deliverable left (the message just taken is locked, so
            -- it lies ahead): the channel waits now, in this same write, for
            -- its first message (at the latest, this lock's expiry), instead
            -- of coming round again only to be found empty, which costs a
            -- single-message consumer a whole call.  (A batch or a p_channel
            -- call leaves that to the next visit.)  The probe is not SKIP
            -- LOCKED: a message another consumer holds right now keeps the
            -- channel in the rotation.  As in _channel_nothing_ready: only in
            -- READ COMMITTED, and only with the channel guard held
            -- exclusively (no producer in flight), after which a fresh probe
            -- sees every committed message and every later producer sees
            -- wait_at and leaves a wake-up.
            SELECT m.dequeue_at INTO v_head
            FROM @extschema@.message AS m
            WHERE m.channel_id = v_channels[i].id
            ORDER BY m.dequeue_at, m.id
            LIMIT 1;
            IF (v_head IS NULL OR v_head > v_now)
                AND pg_catalog.current_setting('transaction_isolation') = 'read committed'
                AND @extschema@._channel_guard_try_exclusive(v_channels[i].name) THEN
                SELECT m.dequeue_at INTO v_head
                FROM @extschema@.message AS m
                WHERE m.channel_id = v_channels[i].id
                ORDER BY m.dequeue_at, m.id
                LIMIT 1;
                IF v_head IS NULL THEN
                    v_wait := 9223372036854775807;
                ELSIF v_head > v_now THEN
                    v_wait := v_head;
                    v_next := GREATEST(v_next, v_head);
                END IF;
            END IF;
        END IF;
        UPDATE @extschema@.channel AS c
        SET
            next_at = CASE WHEN v_wait = 9223372036854775807 THEN NULL ELSE v_next END,
            turn = CASE
                WHEN v_wait = 9223372036854775807 THEN NULL
                ELSE pg_catalog.nextval('@extschema@.channel_turn_seq')
            END,
            wait_at = v_wait,
            last_served_at = v_now,
            num_locked = v_locked,
            num_removed = c.num_removed + CASE WHEN c.max_size IS NULL THEN 0 ELSE v_dead[i] END
        WHERE c.id = v_channels[i].id;
    END LOOP;

    IF pg_catalog.cardinality(v_out_id) = 1 THEN
        id := v_out_id[1];
        channel := (v_channels[v_out_pos[1]]).name;
        content := v_out_content[1];
        state := v_out_state[1];
        num_attempts := v_out_attempts[1];
        dequeue_at := v_out_dequeue_at[1];
        is_recovered := v_out_recovered[1];
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT t.id, (v_channels[t.pos]).name, t.content, t.state, t.num_attempts, t.dequeue_at, t.is_recovered
    FROM ROWS FROM (
        pg_catalog.unnest(v_out_id),
        pg_catalog.unnest(v_out_pos),
        pg_catalog.unnest(v_out_content),
        pg_catalog.unnest(v_out_state),
        pg_catalog.unnest(v_out_attempts),
        pg_catalog.unnest(v_out_dequeue_at),
        pg_catalog.unnest(v_out_recovered)
    ) AS t (id, pos, content, state, num_attempts, dequeue_at, is_recovered)
    ORDER BY
        pg_catalog.row_number() OVER (PARTITION BY t.pos ORDER BY t.dequeue_at, t.id),
        t.pos;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@._message_dequeue_general(bigint, integer, text, bigint, boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.channel_set(
    p_channel text,
    p_max_concurrency integer DEFAULT NULL,
    p_max_size integer DEFAULT NULL,
    p_release_interval_ms bigint DEFAULT 0,
    p_max_attempts integer DEFAULT NULL,
    p_backoff_base_ms bigint DEFAULT 1000,
    p_backoff_factor double precision DEFAULT 2.0,
    p_backoff_max_ms bigint DEFAULT 3600000,
    p_backoff_jitter double precision DEFAULT 0.1,
    p_dedup_window_ms bigint DEFAULT 0,
    p_retain_history boolean DEFAULT FALSE,
    p_notify boolean DEFAULT FALSE
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_interval bigint := COALESCE(p_release_interval_ms, 0);
    v_base bigint := COALESCE(p_backoff_base_ms, 1000);
    v_factor double precision := COALESCE(p_backoff_factor, 2.0);
    v_max bigint := COALESCE(p_backoff_max_ms, 3600000);
    v_jitter double precision := COALESCE(p_backoff_jitter, 0.1);
    v_window bigint := COALESCE(p_dedup_window_ms, 0);
    v_channel @extschema@.channel%ROWTYPE;
    v_locked integer := 0;
    v_held bigint;
    v_next bigint;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    IF p_max_concurrency < 1 THEN
        RAISE EXCEPTION 'lonnymq: p_max_concurrency must be NULL (unlimited) or at least 1, got %',
            p_max_concurrency
            USING ERRCODE = '22023';
    END IF;
    IF p_max_size < 1 THEN
        RAISE EXCEPTION 'lonnymq: p_max_size must be NULL (unlimited) or at least 1, got %',
            p_max_size
            USING ERRCODE = '22023';
    END IF;
    IF v_interval NOT BETWEEN 0 AND 31536000000 THEN
        RAISE EXCEPTION 'lonnymq: p_release_interval_ms must be between 0 and 31536000000 (365 days), got %',
            v_interval
            USING ERRCODE = '22023';
    END IF;

    IF p_max_attempts < 1 THEN
        RAISE EXCEPTION 'lonnymq: p_max_attempts must be NULL (unlimited) or at least 1, got %',
            p_max_attempts
            USING ERRCODE = '22023';
    END IF;
    IF v_base NOT BETWEEN 0 AND 31536000000 OR v_max NOT BETWEEN 0 AND 31536000000 THEN
        RAISE EXCEPTION 'lonnymq: p_backoff_base_ms and p_backoff_max_ms must be between 0 and 31536000000, got % and %',
            v_base, v_max
            USING ERRCODE = '22023';
    END IF;
    IF NOT v_factor BETWEEN 1.0 AND 1000.0 THEN
        RAISE EXCEPTION 'lonnymq: p_backoff_factor must be between 1 and 1000, got %', v_factor
            USING ERRCODE = '22023';
    END IF;
    IF NOT v_jitter BETWEEN 0.0 AND 1.0 THEN
        RAISE EXCEPTION 'lonnymq: p_backoff_jitter must be between 0 and 1, got %', v_jitter
            USING ERRCODE = '22023';
    END IF;
    IF v_window NOT BETWEEN 0 AND 31536000000 THEN
        RAISE EXCEPTION 'lonnymq: p_dedup_window_ms must be between 0 and 31536000000 (365 days), got %',
            v_window
            USING ERRCODE = '22023';
    END IF;

    v_now := @extschema@._clock_ms();
    v_channel := @extschema@._channel_lock(p_channel, v_now);

    PERFORM @extschema@._channel_guard_exclusive(p_channel);
    IF v_channel.max_concurrency IS NOT NULL THEN
        -- Its locks are counted (message.is_counted): message_locked_ix.
        PERFORM 1
        FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel.id AND m.is_locked AND m.is_counted
        FOR SHARE;
    ELSIF p_max_concurrency IS NOT NULL THEN
        -- It gets max_concurrency: its locks are counted from now on.  The
        -- UPDATE waits for their row locks as FOR SHARE does.  They are not
        -- indexed apart: this walks the channel's messages once.  No new
        -- lock can be taken meanwhile (the channel row and guard).
        UPDATE @extschema@.message AS m
        SET is_counted = TRUE
        WHERE m.channel_id = v_channel.id AND m.is_locked;
    ELSIF p_max_size IS NOT NULL THEN
        PERFORM 1
        FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel.id AND m.is_locked
        FOR SHARE;
    END IF;

    IF p_max_concurrency IS NOT NULL THEN
        SELECT pg_catalog.count(*) INTO v_locked
        FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel.id AND m.is_locked AND m.is_counted;
    END IF;

    IF p_max_size IS NOT NULL THEN
        SELECT pg_catalog.count(*) INTO v_held
        FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel.id;
        INSERT INTO @extschema@.channel_quota AS q (channel_id, num_created)
        VALUES (v_channel.id, v_channel.num_removed + v_held)
        ON CONFLICT (channel_id) DO UPDATE
            SET num_created = excluded.num_created;
    ELSE
        DELETE FROM @extschema@.channel_quota AS q
        WHERE q.channel_id = v_channel.id;
    END IF;

    -- A channel in the rotation may now be eligible sooner (a shorter
    -- interval, a higher concurrency limit).  Lowering next_at is always
    -- safe: the next visit recomputes it.
    v_next := v_channel.next_at;
    IF v_next IS NOT NULL THEN
        v_next := LEAST(
            v_next,
            GREATEST(
                v_now,
                COALESCE(v_channel.last_served_at + v_interval, v_now)
            )
        );
    END IF;

    UPDATE @extschema@.channel AS c
    SET
        max_concurrency = p_max_concurrency,
        max_size = p_max_size,
        release_interval_ms = v_interval,
        max_attempts = p_max_attempts,
        backoff_base_ms = v_base,
        backoff_factor = v_factor,
        backoff_max_ms = v_max,
        backoff_jitter = v_jitter,
        dedup_window_ms = v_window,
        retain_history = COALESCE(p_retain_history, FALSE),
        notify = COALESCE(p_notify, FALSE),
        num_locked = v_locked,
        next_at = v_next,
        turn = CASE
            WHEN v_next IS DISTINCT FROM c.next_at
                THEN pg_catalog.nextval('@extschema@.channel_turn_seq')
            ELSE c.turn
        END
    WHERE c.id = v_channel.id;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean
) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.channel_drop(text, boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.channel_pause(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.channel_resume(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.message_create(text, bytea, bigint, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.message_create_batch(text, bytea[], bigint[], text[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.message_cancel(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.message_dequeue(
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
                    -- p_limit deliverable messages (one range scan), update
                    -- each by primary key (the locked rows drive the join),
                    -- and return them in delivery order.  An expired lock due
                    -- for the dead letters among them: nothing is updated and
                    -- the general way takes over (it buries that one; the row
                    -- locks taken here are this transaction's own).
                    RETURN QUERY
                    WITH head AS (
                        SELECT q.id, q.dequeue_at, q.is_locked, q.num_attempts
                        FROM @extschema@.message AS q
                        WHERE q.channel_id = v_channel.id AND q.dequeue_at <= v_now
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

REVOKE ALL ON FUNCTION @extschema@.message_dequeue(bigint, integer, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.message_complete(bigint, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.message_defer(bigint, integer, bigint, bytea) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.message_heartbeat(bigint, integer, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.message_complete_batch(bigint[], integer[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.message_fail(bigint, integer, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.dead_letter_redrive(text, bigint[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.history_prune(bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.dead_letter_delete(text, bigint[], boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.schedule_set(text, text, bytea, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.schedule_drop(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.tick() FROM PUBLIC;

SELECT @extschema@._access_apply();

UPDATE pg_catalog.pg_init_privs AS i
SET initprivs = ARRAY(
    SELECT a
    FROM pg_catalog.unnest(i.initprivs) AS a
    WHERE NOT EXISTS (
        SELECT 1
        FROM pg_catalog.aclexplode(ARRAY[a]) AS x
        WHERE x.grantee NOT IN (0, e.extowner)
    )
)
FROM pg_catalog.pg_extension AS e
WHERE
    e.extname = 'lonnymq'
    AND i.privtype = 'e'
    AND (
        (i.classoid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND i.objoid = e.extnamespace)
        OR EXISTS (
            SELECT 1
            FROM pg_catalog.pg_depend AS d
            WHERE
                d.classid = i.classoid AND d.objid = i.objoid AND d.deptype = 'e'
                AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
        )
    );
