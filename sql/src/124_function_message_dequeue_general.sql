-- Internal: message_dequeue's general way, for every case its fast path
-- does not take (see message_dequeue).  The arguments are checked by the
-- caller; p_now is the caller's clock reading.  p_none_due: the caller has
-- just found no due schedule and no due wake-up (steps 0 and 1 are skipped).
--
-- Every step is a bounded number of index probes:
--   0. materialise up to 4 due periodic messages (schedule_due_ix; one probe
--      when none is due)
--   1. apply up to 8 due wake-ups             (channel_wake_due_ix)
--   2. lock the front of the rotation: up to p_limit eligible channels that
--      no other consumer is serving           (channel_rotation_ix, SKIP LOCKED)
--   3. share the batch among them round-robin, taking each channel's share
--      in one statement                       (message_channel_ix, or
--      message_locked_ix for a channel at max_concurrency; SKIP LOCKED)
--   4. when every eligible channel is being served by someone else, take
--      more from a busy unconstrained channel without taking its turn, so
--      that many consumers of one channel never see it as empty
--   5. write each visited channel once: its next turn, or where it goes when
--      it had nothing deliverable (_channel_nothing_ready), or, for a
--      single-message call without p_channel, waiting at once when it has
--      nothing deliverable left after being served (one or two more probes)
-- At most p_limit + 16 channels are visited.  Paused channels are not in the
-- rotation and are skipped in step 4.  An expired lock on a message that
-- has used up its channel's max_attempts sends it to the dead letters
-- instead (_message_take), and is not delivered.  The rows come back in the
-- order a one-at-a-time rotation would deliver them.
CREATE FUNCTION @extschema@._message_dequeue_general(
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

COMMENT ON FUNCTION @extschema@._message_dequeue_general(bigint, integer, text, bigint, boolean) IS
'Internal: message_dequeue through the rotation (schedules, wake-ups, limits, several channels, dead letters).';

REVOKE ALL ON FUNCTION @extschema@._message_dequeue_general(bigint, integer, text, bigint, boolean) FROM PUBLIC;
