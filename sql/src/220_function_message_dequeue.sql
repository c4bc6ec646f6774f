-- Deliver up to p_limit messages, locking each for p_lock_ms.
--
-- Every step is a bounded index probe:
--   1. apply up to 8 due wake-ups           (channel_wake_due_ix)
--   2. take the front of the rotation       (channel_rotation_ix, SKIP LOCKED)
--   3. take its first deliverable message   (message_channel_ix, or
--      message_locked_ix for a saturated channel), SKIP LOCKED
--   4. give the channel its next turn       (channel_pkey)
-- A channel found with nothing deliverable leaves the rotation (or waits
-- for its first message's time) only when no producer is in flight on it;
-- otherwise it goes to the back.  At most p_limit + 16 channels are visited.
-- When every eligible channel is row-locked by concurrent consumers, a busy
-- unconstrained channel is served without taking its turn (step 5), so that
-- many consumers of one channel never see it as empty.
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
AS $$
#variable_conflict use_column
DECLARE
    v_now bigint;
    v_limit integer := COALESCE(p_limit, 1);
    v_taken integer := 0;
    v_visits integer := 0;
    v_skip bigint[] := '{}';
    v_only bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_message @extschema@.message%ROWTYPE;
    v_wake record;
    v_saturated boolean;
    v_locked integer;
    v_head bigint;
    v_next bigint;
    v_busy bigint[];
    v_busy_id bigint;
BEGIN
    PERFORM @extschema@._check_lock_ms(p_lock_ms);
    IF v_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'lonnymq: p_limit must be between 1 and 1000, got %', v_limit
            USING ERRCODE = '22023';
    END IF;
    IF p_channel IS NOT NULL THEN
        PERFORM @extschema@._check_channel_name(p_channel);
        SELECT c.id INTO v_only
        FROM @extschema@.channel AS c
        WHERE c.name = p_channel;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;

    v_now := @extschema@._clock_ms();

    -- 1. Due wake-ups: a waiting channel got a message deliverable earlier
    -- than it was waiting for.  It joins the rotation at the back (now), not
    -- at the message's dequeue_at.
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

    WHILE v_taken < v_limit AND v_visits < v_limit + 16 LOOP
        v_visits := v_visits + 1;

        -- 2. The front of the rotation that no other consumer is serving.
        IF v_only IS NULL THEN
            SELECT c.* INTO v_channel
            FROM @extschema@.channel AS c
            WHERE c.next_at <= v_now AND c.id <> ALL(v_skip)
            ORDER BY c.next_at, c.turn
            LIMIT 1
            FOR NO KEY UPDATE SKIP LOCKED;
        ELSE
            SELECT c.* INTO v_channel
            FROM @extschema@.channel AS c
            WHERE c.id = v_only AND c.next_at <= v_now AND c.id <> ALL(v_skip)
            FOR NO KEY UPDATE SKIP LOCKED;
        END IF;
        EXIT WHEN NOT FOUND;

        -- 3. Its first deliverable message.  A channel at max_concurrency
        -- may only deliver its own expired locks.
        v_saturated := v_channel.num_locked >= v_channel.max_concurrency;
        IF v_saturated THEN
            SELECT m.* INTO v_message
            FROM @extschema@.message AS m
            WHERE
                m.channel_id = v_channel.id
                AND m.is_locked
                AND m.dequeue_at <= v_now
            ORDER BY m.dequeue_at, m.id
            LIMIT 1
            FOR UPDATE SKIP LOCKED;
        ELSE
            SELECT m.* INTO v_message
            FROM @extschema@.message AS m
            WHERE m.channel_id = v_channel.id AND m.dequeue_at <= v_now
            ORDER BY m.dequeue_at, m.id
            LIMIT 1
            FOR UPDATE SKIP LOCKED;
        END IF;

        IF FOUND THEN
            UPDATE @extschema@.message AS m
            SET
                dequeue_at = v_now + p_lock_ms,
                is_locked = TRUE,
                num_attempts = m.num_attempts + 1
            WHERE m.id = v_message.id;

            -- 4. The channel's next turn: the back of the rotation, after
            -- its release interval; a channel now at max_concurrency waits
            -- for a complete or for its first lock to expire.
            v_locked := v_channel.num_locked;
            IF v_channel.max_concurrency IS NOT NULL AND NOT v_message.is_locked THEN
                v_locked := v_locked + 1;
            END IF;
            v_next := v_now + v_channel.release_interval_ms;
            IF v_locked >= v_channel.max_concurrency THEN
                SELECT m.dequeue_at INTO v_head
                FROM @extschema@.message AS m
                WHERE m.channel_id = v_channel.id AND m.is_locked
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
                num_locked = v_locked
            WHERE c.id = v_channel.id;

            id := v_message.id;
            channel := v_channel.name;
            content := v_message.content;
            state := v_message.state;
            num_attempts := v_message.num_attempts + 1;
            dequeue_at := v_message.dequeue_at;
            is_recovered := v_message.is_locked;
            RETURN NEXT;
            v_taken := v_taken + 1;
            CONTINUE;
        END IF;

        -- Nothing deliverable in this channel right now.
        v_skip := v_skip || v_channel.id;
        IF v_saturated THEN
            SELECT m.dequeue_at INTO v_head
            FROM @extschema@.message AS m
            WHERE m.channel_id = v_channel.id AND m.is_locked
            ORDER BY m.dequeue_at, m.id
            LIMIT 1;
            IF v_head IS NULL THEN
                -- The counter overcounted (it cannot see a lock taken by a
                -- concurrent transaction while channel_set recounted):
                -- nothing is locked, so reset it and retry next visit.
                UPDATE @extschema@.channel AS c
                SET
                    num_locked = 0,
                    next_at = v_now,
                    turn = pg_catalog.nextval('@extschema@.channel_turn_seq')
                WHERE c.id = v_channel.id;
            ELSE
                UPDATE @extschema@.channel AS c
                SET
                    next_at = v_head,
                    turn = pg_catalog.nextval('@extschema@.channel_turn_seq')
                WHERE c.id = v_channel.id;
            END IF;
            CONTINUE;
        END IF;

        SELECT m.dequeue_at INTO v_head
        FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel.id
        ORDER BY m.dequeue_at, m.id
        LIMIT 1;
        IF v_head <= v_now THEN
            -- Deliverable messages exist, but other transactions hold them
            -- at this instant: keep the channel, at the back.
            UPDATE @extschema@.channel AS c
            SET
                next_at = v_now,
                turn = pg_catalog.nextval('@extschema@.channel_turn_seq')
            WHERE c.id = v_channel.id;
            CONTINUE;
        END IF;

        -- Empty, or nothing before v_head.  Saying so needs FOR UPDATE,
        -- which no producer in flight (FOR KEY SHARE) allows; once held,
        -- every producer's message is either committed (and seen by this
        -- fresh probe) or will see wait_at and leave a wake-up.
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel.id
        FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            SELECT m.dequeue_at INTO v_head
            FROM @extschema@.message AS m
            WHERE m.channel_id = v_channel.id
            ORDER BY m.dequeue_at, m.id
            LIMIT 1;
        ELSE
            v_head := v_now;
        END IF;
        IF v_head IS NULL THEN
            UPDATE @extschema@.channel AS c
            SET
                next_at = NULL,
                turn = NULL,
                wait_at = 9223372036854775807,
                epoch = c.epoch + 1
            WHERE c.id = v_channel.id;
        ELSIF v_head > v_now THEN
            UPDATE @extschema@.channel AS c
            SET
                next_at = GREATEST(
                    v_head,
                    COALESCE(c.last_served_at + c.release_interval_ms, v_head)
                ),
                turn = pg_catalog.nextval('@extschema@.channel_turn_seq'),
                wait_at = v_head,
                epoch = c.epoch + 1
            WHERE c.id = v_channel.id;
        ELSE
            -- A producer is in flight, or a message just became visible:
            -- back of the rotation, looked at again next turn.
            UPDATE @extschema@.channel AS c
            SET
                next_at = v_now,
                turn = pg_catalog.nextval('@extschema@.channel_turn_seq')
            WHERE c.id = v_channel.id;
        END IF;
    END LOOP;

    -- 5. Every eligible channel is being served by another consumer right
    -- now.  An unconstrained channel has no count to keep, so take more of
    -- its messages (SKIP LOCKED) without taking its turn.
    IF v_taken < v_limit THEN
        IF v_only IS NOT NULL THEN
            v_busy := ARRAY[v_only];
        ELSE
            SELECT pg_catalog.array_agg(b.id ORDER BY b.next_at, b.turn) INTO v_busy
            FROM (
                SELECT c.id, c.next_at, c.turn
                FROM @extschema@.channel AS c
                WHERE c.next_at <= v_now
                ORDER BY c.next_at, c.turn
                LIMIT 8
            ) AS b;
        END IF;
        FOREACH v_busy_id IN ARRAY COALESCE(v_busy, '{}') LOOP
            SELECT c.* INTO v_channel
            FROM @extschema@.channel AS c
            WHERE c.id = v_busy_id AND c.next_at <= v_now;
            CONTINUE WHEN NOT FOUND
                OR v_channel.max_concurrency IS NOT NULL
                OR v_channel.release_interval_ms > 0;
            FOR v_message IN
                SELECT m.*
                FROM @extschema@.message AS m
                WHERE m.channel_id = v_channel.id AND m.dequeue_at <= v_now
                ORDER BY m.dequeue_at, m.id
                LIMIT v_limit - v_taken
                FOR UPDATE SKIP LOCKED
            LOOP
                UPDATE @extschema@.message AS m
                SET
                    dequeue_at = v_now + p_lock_ms,
                    is_locked = TRUE,
                    num_attempts = m.num_attempts + 1
                WHERE m.id = v_message.id;
                id := v_message.id;
                channel := v_channel.name;
                content := v_message.content;
                state := v_message.state;
                num_attempts := v_message.num_attempts + 1;
                dequeue_at := v_message.dequeue_at;
                is_recovered := v_message.is_locked;
                RETURN NEXT;
                v_taken := v_taken + 1;
            END LOOP;
            EXIT WHEN v_taken >= v_limit;
        END LOOP;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_dequeue(bigint, integer, text) IS
'Deliver up to p_limit ready messages (default 1), channels served round-robin within their limits, each locked for p_lock_ms. Expired locks are recovered here (is_recovered). num_attempts is the fencing token for complete, defer and heartbeat. Returns no rows when nothing is ready.';

REVOKE ALL ON FUNCTION @extschema@.message_dequeue(bigint, integer, text) FROM PUBLIC;
