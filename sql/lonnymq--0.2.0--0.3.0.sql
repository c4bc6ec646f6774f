-- lonnymq 0.2.0 -> 0.3.0 as released, without the statements that changed nothing (the
-- functions and comments it re-created as they were: tools/build_upgrade.py).
\echo Use "ALTER EXTENSION lonnymq UPDATE TO '0.3.0'" to load this file. \quit

DROP INDEX @extschema@.message_channel_ix;

CREATE INDEX message_channel_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE channel_id IS NOT NULL;

DROP INDEX @extschema@.message_locked_ix;

CREATE INDEX message_locked_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE is_locked AND channel_id IS NOT NULL;

DROP INDEX @extschema@.channel_wake_due_ix;

CREATE INDEX channel_wake_due_ix
ON @extschema@.channel_wake (wake_at, id)
WHERE wake_at IS NOT NULL;

DROP INDEX @extschema@.dead_letter_channel_ix;

CREATE INDEX dead_letter_channel_ix
ON @extschema@.dead_letter (channel, id)
WHERE channel IS NOT NULL;

REVOKE ALL ON FUNCTION @extschema@._clock_ms() FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_channel_name(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_lock_ms(bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_token(bigint, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_shared(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_shared(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_exclusive(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_exclusive(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._attempt_log_append(
    p_log jsonb,
    p_attempt integer,
    p_at bigint,
    p_error text
)
RETURNS jsonb
LANGUAGE sql
STABLE
AS $$
    SELECT COALESCE(p_log, '[]'::jsonb) || pg_catalog.jsonb_build_array(
        pg_catalog.jsonb_build_object('attempt', p_attempt, 'at', p_at, 'error', p_error)
    )
$$;

COMMENT ON FUNCTION @extschema@._attempt_log_append(jsonb, integer, bigint, text) IS
'Internal: the attempt log with one failed attempt (number, time, error) appended.';

REVOKE ALL ON FUNCTION @extschema@._attempt_log_append(jsonb, integer, bigint, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_access(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_key(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._dead_letter_requeued(@extschema@.channel, integer, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_lock(text, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_quota_take(bigint, integer, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_for_producer(text, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_wake(bigint, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_release(bigint, integer, boolean, bigint) FROM PUBLIC;

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
    p_window_ms bigint
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
        -- generic plan can use the partial index message_locked_ix.
        IF v_expired_only THEN
            OPEN v_cursor FOR
            SELECT m.id, m.dequeue_at, m.is_locked, m.num_attempts
            FROM @extschema@.message AS m
            WHERE
                m.channel_id = p_channel_id
                AND m.is_locked
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

REVOKE ALL ON FUNCTION @extschema@._message_take(
    bigint, bigint, bigint, integer, boolean, integer, boolean, text, bigint
) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._message_key_claim(bigint, text, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._message_key_release(bigint, text, bigint, bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._message_bury(
    p_id bigint,
    p_channel_id bigint,
    p_channel text,
    p_error text,
    p_now bigint,
    p_window_ms bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_key text;
BEGIN
    WITH gone AS (
        DELETE FROM @extschema@.message AS m
        WHERE m.id = p_id
        RETURNING m.*
    )

    INSERT INTO @extschema@.dead_letter (
        id, channel, key, content, state, num_attempts, created_at, dead_at,
        last_error, attempt_log
    )
    SELECT
        g.id,
        p_channel,
        g.key,
        g.content,
        g.state,
        g.num_attempts,
        g.created_at,
        p_now,
        p_error,
        @extschema@._attempt_log_append(g.attempt_log, g.num_attempts, p_now, p_error)
    FROM gone AS g
    RETURNING key INTO v_key;
    IF v_key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(p_channel_id, v_key, p_id, p_window_ms, p_now);
    END IF;
END;
$$;

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
    -- than it was waiting for.  It joins the rotation at the back (now), not
    -- at the message's dequeue_at.
    IF NOT p_none_due THEN
        FOR v_wake IN
            SELECT
                w.id AS wake_id,
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
                    v_now,
                    COALESCE(v_wake.last_served_at + v_wake.release_interval_ms, v_now)
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
                    v_channels[i].max_attempts, TRUE, v_channels[i].name, v_channels[i].dedup_window_ms
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
                v_channel.dedup_window_ms
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
        IF v_locked >= v_channels[i].max_concurrency THEN
            SELECT m.dequeue_at INTO v_head
            FROM @extschema@.message AS m
            WHERE m.channel_id = v_channels[i].id AND m.is_locked
            ORDER BY m.dequeue_at, m.id
            LIMIT 1;
            v_next := GREATEST(v_next, v_head);
        END IF;
        UPDATE @extschema@.channel AS c
        SET
            next_at = v_next,
            turn = pg_catalog.nextval('@extschema@.channel_turn_seq'),
            wait_at = NULL,
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

COMMENT ON FUNCTION @extschema@._message_dequeue_general(bigint, integer, text, bigint, boolean) IS
'Internal: message_dequeue through the rotation (schedules, wake-ups, limits, several channels, dead letters).';

REVOKE ALL ON FUNCTION @extschema@._message_dequeue_general(bigint, integer, text, bigint, boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean
) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.channel_drop(text, boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.channel_pause(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.channel_resume(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.message_create(
    p_channel text,
    p_content bytea,
    p_dequeue_at bigint DEFAULT NULL,
    p_key text DEFAULT NULL
)
RETURNS bigint
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
DECLARE
    v_now bigint;
    v_dequeue_at bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_id bigint;
    v_existing bigint;
BEGIN
    IF p_channel IS NULL OR pg_catalog.length(p_channel) NOT BETWEEN 1 AND 255 THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    IF p_content IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_content must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.octet_length(p_content) > 16777216 THEN
        RAISE EXCEPTION 'lonnymq: p_content is % bytes, the limit is 16777216 (16 MiB)',
            pg_catalog.octet_length(p_content)
            USING ERRCODE = '54000';
    END IF;
    IF p_key IS NOT NULL THEN
        PERFORM @extschema@._check_key(p_key);
    END IF;

    v_now := @extschema@._clock_ms();
    -- The default is the transaction's start, so that messages created in one
    -- transaction share a dequeue_at and keep their order by id.
    v_dequeue_at := COALESCE(p_dequeue_at, @extschema@.to_epoch(pg_catalog.now()));
    -- _channel_for_producer, inlined for a channel that exists: the guard
    -- shared, then the row.
    PERFORM @extschema@._channel_guard_shared(p_channel);
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.name = p_channel;
    IF NOT FOUND THEN
        v_channel := @extschema@._channel_for_producer(p_channel, v_now);
    END IF;
    IF p_key IS NOT NULL THEN
        v_id := pg_catalog.nextval('@extschema@.message_id_seq');
        v_existing := @extschema@._message_key_claim(v_channel.id, p_key, v_id, v_now);
        IF v_existing IS NOT NULL THEN
            RETURN v_existing;
        END IF;
    END IF;

    IF v_channel.max_size IS NOT NULL
        AND @extschema@._channel_quota_take(v_channel.id, v_channel.max_size, 1) = 0 THEN
        IF p_key IS NOT NULL THEN
            DELETE FROM @extschema@.message_key AS k
            WHERE k.channel_id = v_channel.id AND k.key = p_key AND k.message_id = v_id;
        END IF;
        RETURN NULL;
    END IF;

    IF p_key IS NULL THEN
        INSERT INTO @extschema@.message (channel_id, dequeue_at, created_at, content)
        VALUES (v_channel.id, v_dequeue_at, v_now, p_content)
        RETURNING id INTO v_id;
    ELSE
        INSERT INTO @extschema@.message (id, channel_id, dequeue_at, created_at, content, key)
        VALUES (v_id, v_channel.id, v_dequeue_at, v_now, p_content, p_key);
    END IF;

    -- (_channel_wake's own first test, inlined: nothing to do for a channel
    -- in the rotation, in READ COMMITTED.)
    IF v_channel.wait_at IS NOT NULL
        OR pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM @extschema@._channel_wake(
            v_channel.id, v_channel.wait_at, GREATEST(v_dequeue_at, v_now)
        );
    END IF;
    IF v_channel.notify AND v_dequeue_at <= v_now AND NOT v_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', p_channel);
    END IF;
    RETURN v_id;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.message_create(text, bytea, bigint, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.message_create_batch(
    p_channel text,
    p_contents bytea[],
    p_dequeue_at bigint[] DEFAULT NULL,
    p_keys text[] DEFAULT NULL
)
RETURNS SETOF bigint
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
DECLARE
    v_n integer;
    v_now bigint;
    v_default bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_ids bigint[];
    v_out bigint[];
    v_keep boolean[];
    v_claimed bigint[];
    v_largest bigint;
    v_room integer;
    v_dropped bigint[] := '{}';
    v_dropped_keys text[] := '{}';
    v_ready_at bigint;
    v_key text;
    v_existing bigint;
    i integer;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    IF p_contents IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_contents must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    v_n := pg_catalog.cardinality(p_contents);
    IF pg_catalog.array_ndims(p_contents) <> 1
        OR pg_catalog.array_ndims(p_dequeue_at) <> 1
        OR pg_catalog.array_ndims(p_keys) <> 1 THEN
        RAISE EXCEPTION 'lonnymq: p_contents, p_dequeue_at and p_keys must be one-dimensional arrays'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.cardinality(p_dequeue_at) <> v_n OR pg_catalog.cardinality(p_keys) <> v_n THEN
        RAISE EXCEPTION 'lonnymq: p_dequeue_at and p_keys must have as many elements as p_contents (%), got % and %',
            v_n, pg_catalog.cardinality(p_dequeue_at), pg_catalog.cardinality(p_keys)
            USING ERRCODE = '22023';
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF v_n > 10000 THEN
        RAISE EXCEPTION 'lonnymq: a batch holds at most 10000 messages, got %', v_n
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_contents, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'lonnymq: p_contents[%] is NULL', pg_catalog.array_position(p_contents, NULL)
            USING ERRCODE = '22004';
    END IF;
    SELECT pg_catalog.max(pg_catalog.octet_length(c.content)) INTO v_largest
    FROM pg_catalog.unnest(p_contents) AS c (content);
    IF v_largest > 16777216 THEN
        RAISE EXCEPTION 'lonnymq: a content is % bytes, the limit is 16777216 (16 MiB)', v_largest
            USING ERRCODE = '54000';
    END IF;
    IF p_keys IS NOT NULL THEN
        SELECT pg_catalog.min(k.key) INTO v_key
        FROM pg_catalog.unnest(p_keys) AS k (key)
        WHERE pg_catalog.length(k.key) NOT BETWEEN 1 AND 1024;
        PERFORM @extschema@._check_key(v_key);
    END IF;

    v_now := @extschema@._clock_ms();
    v_default := @extschema@.to_epoch(pg_catalog.now());
    v_channel := @extschema@._channel_for_producer(p_channel, v_now);
    v_ids := ARRAY(
        SELECT s.id
        FROM (
            SELECT pg_catalog.nextval('@extschema@.message_id_seq') AS id
            FROM pg_catalog.generate_series(1, v_n)
        ) AS s
        ORDER BY s.id
    );
    v_out := v_ids;
    v_keep := pg_catalog.array_fill(TRUE, ARRAY[v_n]);

    IF p_keys IS NOT NULL THEN
        -- Claim every key at once; the first occurrence of a repeated key
        -- wins.  Keys already held (or repeated) are resolved one by one.
        WITH claimed AS (
            INSERT INTO @extschema@.message_key AS mk (channel_id, key, message_id)
            SELECT v_channel.id, k.key, v_ids[k.i]
            FROM ROWS FROM (pg_catalog.unnest(p_keys)) WITH ORDINALITY AS k (key, i)
            WHERE k.key IS NOT NULL
            ORDER BY k.i
            ON CONFLICT (channel_id, key) DO NOTHING
            RETURNING mk.message_id
        )

        SELECT pg_catalog.array_agg(c.message_id) INTO v_claimed
        FROM claimed AS c;
        v_claimed := COALESCE(v_claimed, '{}');
        FOR i IN 1..v_n LOOP
            v_key := p_keys[pg_catalog.array_lower(p_keys, 1) + i - 1];
            CONTINUE WHEN v_key IS NULL OR v_ids[i] = ANY(v_claimed);
            v_existing := @extschema@._message_key_claim(v_channel.id, v_key, v_ids[i], v_now);
            IF v_existing IS NOT NULL THEN
                v_out[i] := v_existing;
                v_keep[i] := FALSE;
            END IF;
        END LOOP;
    END IF;

    IF v_channel.max_size IS NOT NULL THEN
        -- Room for the new ones (not the duplicates), in input order.
        v_room := @extschema@._channel_quota_take(
            v_channel.id, v_channel.max_size,
            (SELECT pg_catalog.count(*)::integer FROM pg_catalog.unnest(v_keep) AS k (keep) WHERE k.keep)
        );
        FOR i IN 1..v_n LOOP
            CONTINUE WHEN NOT v_keep[i];
            IF v_room > 0 THEN
                v_room := v_room - 1;
            ELSE
                v_keep[i] := FALSE;
                v_dropped := v_dropped || v_ids[i];
                IF p_keys IS NOT NULL THEN
                    v_dropped_keys := v_dropped_keys || p_keys[pg_catalog.array_lower(p_keys, 1) + i - 1];
                END IF;
                v_out[i] := NULL;
            END IF;
        END LOOP;
        IF pg_catalog.cardinality(v_dropped) > 0 THEN
            DELETE FROM @extschema@.message_key AS k
            WHERE
                k.channel_id = v_channel.id
                AND k.key = ANY(v_dropped_keys)
                AND k.message_id = ANY(v_dropped);
            -- A repeat of a dropped message's key is dropped with it.
            FOR i IN 1..v_n LOOP
                IF v_out[i] = ANY(v_dropped) THEN
                    v_out[i] := NULL;
                END IF;
            END LOOP;
        END IF;
    END IF;

    INSERT INTO @extschema@.message (id, channel_id, dequeue_at, created_at, content, key)
    SELECT
        v_ids[r.i],
        v_channel.id,
        COALESCE(r.dequeue_at, v_default),
        v_now,
        r.content,
        r.key
    FROM ROWS FROM (
        pg_catalog.unnest(p_contents),
        pg_catalog.unnest(p_dequeue_at),
        pg_catalog.unnest(p_keys)
    ) WITH ORDINALITY AS r (content, dequeue_at, key, i)
    WHERE v_keep[r.i]
    ORDER BY r.i;

    SELECT pg_catalog.min(COALESCE(r.dequeue_at, v_default)) INTO v_ready_at
    FROM ROWS FROM (pg_catalog.unnest(p_dequeue_at), pg_catalog.unnest(v_keep)) AS r (dequeue_at, keep)
    WHERE r.keep;
    IF v_ready_at IS NOT NULL THEN
        PERFORM @extschema@._channel_wake(v_channel.id, v_channel.wait_at, GREATEST(v_ready_at, v_now));
        IF v_channel.notify AND v_ready_at <= v_now AND NOT v_channel.is_paused THEN
            PERFORM pg_catalog.pg_notify('lonnymq', p_channel);
        END IF;
    END IF;

    RETURN QUERY
    SELECT o.id
    FROM ROWS FROM (pg_catalog.unnest(v_out)) WITH ORDINALITY AS o (id, i)
    ORDER BY o.i;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.message_create_batch(text, bytea[], bigint[], text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.message_cancel(p_id bigint)
RETURNS boolean
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
DECLARE
    v_channel_id bigint;
    v_sized boolean;
    v_key text;
BEGIN
    IF p_id IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_id must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    SELECT m.channel_id INTO v_channel_id
    FROM @extschema@.message AS m
    WHERE m.id = p_id;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    SELECT c.max_size IS NOT NULL INTO v_sized
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id;
    IF v_sized THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel_id
        FOR NO KEY UPDATE;
    END IF;
    DELETE FROM @extschema@.message AS m
    WHERE m.id = p_id AND NOT m.is_locked
    RETURNING m.key INTO v_key;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    IF v_key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(v_channel_id, v_key, p_id, 0, 0);
    END IF;
    UPDATE @extschema@.channel AS c
    SET num_removed = c.num_removed + 1
    WHERE c.id = v_channel_id AND c.max_size IS NOT NULL;
    RETURN TRUE;
END;
$$;

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
    v_front bigint[];
    v_front_name text;
    v_channel @extschema@.channel%ROWTYPE;
    v_ids bigint[];
    v_old_at bigint[];
    v_old_locked boolean[];
    v_bury boolean;
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
            (
                SELECT s.next_at
                FROM @extschema@.schedule AS s
                WHERE s.next_at <= v_now
                ORDER BY s.next_at
                LIMIT 1
            ) IS NOT NULL
            OR (
                SELECT w.wake_at
                FROM @extschema@.channel_wake AS w
                WHERE w.wake_at <= v_now
                ORDER BY w.wake_at, w.id
                LIMIT 1
            ) IS NOT NULL,
            f.ids,
            f.names[1]
        INTO v_due, v_front, v_front_name
        FROM (
            SELECT
                pg_catalog.array_agg(e.id ORDER BY e.next_at, e.turn) AS ids,
                pg_catalog.array_agg(e.name ORDER BY e.next_at, e.turn) AS names
            FROM (
                SELECT c.id, c.name, c.next_at, c.turn
                FROM @extschema@.channel AS c
                WHERE c.next_at <= v_now
                ORDER BY c.next_at, c.turn
                LIMIT 2
            ) AS e
        ) AS f;
        IF NOT v_due
            AND pg_catalog.cardinality(v_front) = 1
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
                        q.channel_id = v_front[1]
                        AND q.dequeue_at <= v_now
                        AND EXISTS (
                            SELECT 1
                            FROM @extschema@.channel AS c
                            WHERE
                                c.id = v_front[1]
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
                            SELECT c.max_attempts FROM @extschema@.channel AS c WHERE c.id = v_front[1]
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
                WHERE c.id = v_front[1];
                IF FOUND
                    AND v_channel.max_concurrency IS NULL
                    AND v_channel.release_interval_ms = 0
                    AND NOT v_channel.is_paused
                    AND v_channel.next_at <= v_now THEN
                    -- A batch: lock the channel's first p_limit deliverable
                    -- messages (one range scan), then update them by primary
                    -- key in one statement.  An expired lock due for the dead
                    -- letters among them: the general way (which buries it;
                    -- the row locks taken here are this transaction's own).
                    SELECT
                        pg_catalog.array_agg(q.id ORDER BY q.dequeue_at, q.id),
                        pg_catalog.array_agg(q.dequeue_at ORDER BY q.dequeue_at, q.id),
                        pg_catalog.array_agg(q.is_locked ORDER BY q.dequeue_at, q.id),
                        COALESCE(
                            pg_catalog.bool_or(q.is_locked AND q.num_attempts >= v_channel.max_attempts),
                            FALSE
                        )
                    INTO v_ids, v_old_at, v_old_locked, v_bury
                    FROM (
                        SELECT q.id, q.dequeue_at, q.is_locked, q.num_attempts
                        FROM @extschema@.message AS q
                        WHERE q.channel_id = v_channel.id AND q.dequeue_at <= v_now
                        ORDER BY q.dequeue_at, q.id
                        LIMIT v_limit
                        FOR UPDATE SKIP LOCKED
                    ) AS q;
                    IF v_ids IS NOT NULL AND NOT v_bury THEN
                        RETURN QUERY
                        WITH taken AS (
                            UPDATE @extschema@.message AS m
                            SET
                                dequeue_at = v_now + p_lock_ms,
                                is_locked = TRUE,
                                num_attempts = m.num_attempts + 1,
                                attempt_log = CASE
                                    WHEN m.is_locked THEN
                                        @extschema@._attempt_log_append(
                                            m.attempt_log, m.num_attempts, v_now, 'lock expired'
                                        )
                                    ELSE m.attempt_log
                                END
                            WHERE m.id = ANY(v_ids)
                            RETURNING m.id, m.content, m.state, m.num_attempts
                        ),

                        -- Back into v_ids' order (the rotation's): each row's
                        -- position, then the columns as arrays in that order
                        -- (no join: the planner, with hash joins off, would
                        -- compare every pair).
                        placed AS (
                            SELECT
                                t.content,
                                t.state,
                                t.num_attempts,
                                pg_catalog.array_position(v_ids, t.id) AS pos
                            FROM taken AS t
                        ),

                        sorted AS (
                            SELECT
                                pg_catalog.array_agg(p.content ORDER BY p.pos) AS contents,
                                pg_catalog.array_agg(p.state ORDER BY p.pos) AS states,
                                pg_catalog.array_agg(p.num_attempts ORDER BY p.pos) AS attempts
                            FROM placed AS p
                        )

                        SELECT
                            o.id, v_channel.name, o.content, o.state, o.num_attempts,
                            o.dequeue_at, o.is_locked
                        FROM sorted AS s
                        CROSS JOIN LATERAL ROWS FROM (
                            pg_catalog.unnest(v_ids),
                            pg_catalog.unnest(s.contents),
                            pg_catalog.unnest(s.states),
                            pg_catalog.unnest(s.attempts),
                            pg_catalog.unnest(v_old_at),
                            pg_catalog.unnest(v_old_locked)
                        ) AS o (id, content, state, num_attempts, dequeue_at, is_locked);
                        RETURN;
                    END IF;
                END IF;
            END IF;
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

CREATE OR REPLACE FUNCTION @extschema@.message_complete(
    p_id bigint,
    p_num_attempts integer
)
RETURNS boolean
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
DECLARE
    v_channel record;
    v_gone record;
    v_key text;
    v_now bigint;
BEGIN
    IF p_id IS NULL OR p_num_attempts IS NULL THEN
        PERFORM @extschema@._check_token(p_id, p_num_attempts);
    END IF;
    SELECT
        c.id,
        c.name,
        c.max_concurrency IS NOT NULL OR c.max_size IS NOT NULL AS is_constrained,
        c.retain_history,
        c.dedup_window_ms
    INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = (
        SELECT m.channel_id
        FROM @extschema@.message AS m
        WHERE m.id = p_id
    );
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    v_now := @extschema@._clock_ms();
    -- Lock order, as everywhere: the channel row before the message row.
    -- Only a channel with limits needs its row locked.
    IF v_channel.is_constrained THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel.id
        FOR NO KEY UPDATE;
    END IF;
    IF v_channel.retain_history THEN
        DELETE FROM @extschema@.message AS m
        WHERE
            m.id = p_id
            AND m.num_attempts = p_num_attempts
            AND m.is_locked
        RETURNING m.* INTO v_gone;
        IF NOT FOUND THEN
            RETURN FALSE;
        END IF;
        v_key := v_gone.key;
        INSERT INTO @extschema@.message_history (
            id, channel, key, content, state, num_attempts, created_at, completed_at
        )
        VALUES (
            v_gone.id, v_channel.name, v_gone.key, v_gone.content, v_gone.state,
            v_gone.num_attempts, v_gone.created_at, v_now
        );
    ELSE
        DELETE FROM @extschema@.message AS m
        WHERE
            m.id = p_id
            AND m.num_attempts = p_num_attempts
            AND m.is_locked
        RETURNING m.key INTO v_key;
        IF NOT FOUND THEN
            RETURN FALSE;
        END IF;
    END IF;
    -- A statement of its own, after the DELETE, even for a channel that had
    -- no limits at the lookup: a limit that channel_set committed meanwhile
    -- (it waits for this message's row lock) is seen, and counted.
    PERFORM @extschema@._channel_release(v_channel.id, 1, TRUE, v_now);
    IF v_key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(
            v_channel.id, v_key, p_id, v_channel.dedup_window_ms, v_now
        );
    END IF;
    RETURN TRUE;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.message_complete(bigint, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.message_defer(
    p_id bigint,
    p_num_attempts integer,
    p_dequeue_at bigint DEFAULT NULL,
    p_state bytea DEFAULT NULL
)
RETURNS boolean
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
DECLARE
    v_now bigint;
    v_dequeue_at bigint;
    v_channel_id bigint;
    v_wait_at bigint;
    v_constrained boolean;
    v_name text;
    v_notify boolean;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    IF pg_catalog.octet_length(p_state) > 16777216 THEN
        RAISE EXCEPTION 'lonnymq: p_state is % bytes, the limit is 16777216 (16 MiB)',
            pg_catalog.octet_length(p_state)
            USING ERRCODE = '54000';
    END IF;
    v_now := @extschema@._clock_ms();
    v_dequeue_at := COALESCE(p_dequeue_at, v_now);

    SELECT m.channel_id INTO v_channel_id
    FROM @extschema@.message AS m
    WHERE m.id = p_id;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    SELECT c.name, c.max_concurrency IS NOT NULL INTO v_name, v_constrained
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id;
    -- Lock order, as everywhere: the channel row, then the channel guard,
    -- then the message row.  A channel with max_concurrency is locked for
    -- its counter; the guard is held shared, like a producer's, so that no
    -- consumer declares the channel empty or waiting while this message's
    -- new time is invisible to it.
    IF v_constrained THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel_id
        FOR NO KEY UPDATE;
    END IF;
    PERFORM @extschema@._channel_guard_shared(v_name);
    SELECT c.wait_at, c.notify AND NOT c.is_paused INTO v_wait_at, v_notify
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id;

    UPDATE @extschema@.message AS m
    SET
        is_locked = FALSE,
        dequeue_at = v_dequeue_at,
        state = COALESCE(p_state, m.state)
    WHERE
        m.id = p_id
        AND m.num_attempts = p_num_attempts
        AND m.is_locked;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;

    PERFORM @extschema@._channel_release(v_channel_id, 1, FALSE, v_now);
    -- Like a producer: the message may now be deliverable before the time a
    -- waiting channel will next be looked at.
    PERFORM @extschema@._channel_wake(
        v_channel_id, v_wait_at, GREATEST(v_dequeue_at, v_now)
    );
    IF v_notify AND v_dequeue_at <= v_now THEN
        PERFORM pg_catalog.pg_notify('lonnymq', v_name);
    END IF;
    RETURN TRUE;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.message_defer(bigint, integer, bigint, bytea) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.message_heartbeat(
    p_id bigint,
    p_num_attempts integer,
    p_lock_ms bigint
)
RETURNS boolean
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
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    PERFORM @extschema@._check_lock_ms(p_lock_ms);
    UPDATE @extschema@.message AS m
    SET dequeue_at = GREATEST(m.dequeue_at, @extschema@._clock_ms() + p_lock_ms)
    WHERE
        m.id = p_id
        AND m.num_attempts = p_num_attempts
        AND m.is_locked;
    RETURN FOUND;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.message_heartbeat(bigint, integer, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.message_complete_batch(
    p_ids bigint[],
    p_num_attempts integer[]
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_hashjoin = on
SET enable_mergejoin = off
AS $$
DECLARE
    v_now bigint;
    v_done integer := 0;
    v_count record;
    v_channel_ids bigint[];
    v_history_ids bigint[];
    v_gone_ids bigint[];
    v_gone_channels bigint[];
    v_gone_keys text[];
    v_window bigint;
    i integer;
BEGIN
    IF p_ids IS NULL OR p_num_attempts IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_ids and p_num_attempts must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.cardinality(p_ids) <> pg_catalog.cardinality(p_num_attempts) THEN
        RAISE EXCEPTION 'lonnymq: p_ids has % elements but p_num_attempts has %',
            pg_catalog.cardinality(p_ids), pg_catalog.cardinality(p_num_attempts)
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.cardinality(p_ids) = 0 THEN
        RETURN 0;
    END IF;
    IF pg_catalog.array_ndims(p_ids) <> 1 OR pg_catalog.array_ndims(p_num_attempts) <> 1 THEN
        RAISE EXCEPTION 'lonnymq: p_ids and p_num_attempts must be one-dimensional arrays'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'lonnymq: a batch holds at most 10000 messages, got %', pg_catalog.cardinality(p_ids)
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_ids, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_num_attempts, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'lonnymq: p_ids and p_num_attempts must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    v_now := @extschema@._clock_ms();

    -- The batch's channels (one primary-key probe per message); limited
    -- ones are locked, in id order, before any message row.
    SELECT pg_catalog.array_agg(DISTINCT m.channel_id) INTO v_channel_ids
    FROM @extschema@.message AS m
    WHERE m.id = ANY(p_ids);
    IF v_channel_ids IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM 1
    FROM @extschema@.channel AS c
    WHERE
        c.id = ANY(v_channel_ids)
        AND (c.max_concurrency IS NOT NULL OR c.max_size IS NOT NULL)
    ORDER BY c.id
    FOR NO KEY UPDATE OF c;
    SELECT pg_catalog.array_agg(c.id) FILTER (WHERE c.retain_history) INTO v_history_ids
    FROM @extschema@.channel AS c
    WHERE c.id = ANY(v_channel_ids);

    -- One DELETE (one more probe per message).  Only channels that retain
    -- history make it copy the rows.
    IF v_history_ids IS NULL THEN
        WITH gone AS (
            DELETE FROM @extschema@.message AS m
            USING ROWS FROM (
                pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)
            ) AS t (id, num_attempts)
            WHERE
                m.id = ANY(p_ids)
                AND m.id = t.id
                AND m.num_attempts = t.num_attempts
                AND m.is_locked
            RETURNING m.id, m.channel_id, m.key
        )

        SELECT
            pg_catalog.array_agg(g.id),
            pg_catalog.array_agg(g.channel_id),
            pg_catalog.array_agg(g.key)
        INTO v_gone_ids, v_gone_channels, v_gone_keys
        FROM gone AS g;
    ELSE
        WITH gone AS (
            DELETE FROM @extschema@.message AS m
            USING ROWS FROM (
                pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)
            ) AS t (id, num_attempts)
            WHERE
                m.id = ANY(p_ids)
                AND m.id = t.id
                AND m.num_attempts = t.num_attempts
                AND m.is_locked
            RETURNING m.id, m.channel_id, m.key, m.content, m.state, m.num_attempts, m.created_at
        ),

        kept AS (
            INSERT INTO @extschema@.message_history (
                id, channel, key, content, state, num_attempts, created_at, completed_at
            )
            SELECT
                g.id, c.name, g.key, g.content, g.state, g.num_attempts, g.created_at, v_now
            FROM gone AS g
            INNER JOIN @extschema@.channel AS c ON c.id = g.channel_id
            WHERE g.channel_id = ANY(v_history_ids)
        )

        SELECT
            pg_catalog.array_agg(g.id),
            pg_catalog.array_agg(g.channel_id),
            pg_catalog.array_agg(g.key)
        INTO v_gone_ids, v_gone_channels, v_gone_keys
        FROM gone AS g;
    END IF;
    IF v_gone_ids IS NULL THEN
        RETURN 0;
    END IF;

    -- Keys: each keyed message's claim lasts its channel's dedup window.
    FOR i IN 1..pg_catalog.cardinality(v_gone_ids) LOOP
        CONTINUE WHEN v_gone_keys[i] IS NULL;
        SELECT c.dedup_window_ms INTO v_window
        FROM @extschema@.channel AS c
        WHERE c.id = v_gone_channels[i];
        PERFORM @extschema@._message_key_release(
            v_gone_channels[i], v_gone_keys[i], v_gone_ids[i], v_window, v_now
        );
    END LOOP;

    -- Counters, once per channel.
    FOR v_count IN
        SELECT g.channel_id, pg_catalog.count(*)::integer AS n
        FROM pg_catalog.unnest(v_gone_channels) AS g (channel_id)
        GROUP BY g.channel_id
        ORDER BY g.channel_id
    LOOP
        v_done := v_done + v_count.n;
        PERFORM @extschema@._channel_release(v_count.channel_id, v_count.n, TRUE, v_now);
    END LOOP;
    RETURN v_done;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.message_complete_batch(bigint[], integer[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.message_fail(
    p_id bigint,
    p_num_attempts integer,
    p_error text DEFAULT NULL
)
RETURNS text
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
DECLARE
    v_now bigint;
    v_channel_id bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_dequeue_at bigint;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    IF pg_catalog.octet_length(p_error) > 1048576 THEN
        RAISE EXCEPTION 'lonnymq: p_error is % bytes, the limit is 1048576 (1 MiB)',
            pg_catalog.octet_length(p_error)
            USING ERRCODE = '54000';
    END IF;
    SELECT m.channel_id INTO v_channel_id
    FROM @extschema@.message AS m
    WHERE m.id = p_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id;
    IF v_channel.max_concurrency IS NOT NULL OR v_channel.max_size IS NOT NULL THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel_id
        FOR NO KEY UPDATE;
    END IF;
    PERFORM @extschema@._channel_guard_shared(v_channel.name);
    -- Fresh after the locks: the policy, and wait_at for the wake-up.
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id;
    v_now := @extschema@._clock_ms();

    PERFORM 1
    FROM @extschema@.message AS m
    WHERE
        m.id = p_id
        AND m.num_attempts = p_num_attempts
        AND m.is_locked
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    IF p_num_attempts >= v_channel.max_attempts THEN
        PERFORM @extschema@._message_bury(
            p_id, v_channel_id, v_channel.name, p_error, v_now, v_channel.dedup_window_ms
        );
        PERFORM @extschema@._channel_release(v_channel_id, 1, TRUE, v_now);
        RETURN 'dead';
    END IF;

    v_dequeue_at := v_now + @extschema@._backoff_ms(v_channel, p_num_attempts);
    UPDATE @extschema@.message AS m
    SET
        is_locked = FALSE,
        dequeue_at = v_dequeue_at,
        attempt_log = @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, v_now, p_error)
    WHERE m.id = p_id;
    PERFORM @extschema@._channel_release(v_channel_id, 1, FALSE, v_now);
    PERFORM @extschema@._channel_wake(v_channel_id, v_channel.wait_at, v_dequeue_at);
    IF v_channel.notify AND v_dequeue_at <= v_now AND NOT v_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', v_channel.name);
    END IF;
    RETURN 'retry';
END;
$$;

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
