-- lonnymq 0.7.0 -> 0.8.0 as released, without the statements that changed nothing (the
-- functions and comments it re-created as they were: tools/build_upgrade.py).
\echo Use "ALTER EXTENSION lonnymq UPDATE TO '0.8.0'" to load this file. \quit

DROP FUNCTION @extschema@._message_dequeue_general(bigint, integer, text, bigint, boolean);

DROP FUNCTION @extschema@._channel_nothing_ready(@extschema@.channel, bigint);

DROP FUNCTION @extschema@._channel_floor_raise(bigint, bigint);

DROP FUNCTION @extschema@._message_take(
    bigint, bigint, bigint, integer, boolean, integer, boolean, text, bigint, boolean
);

ALTER TABLE @extschema@.channel DROP COLUMN floor_checked_at;

DROP FUNCTION @extschema@._channel_floor_mark(bigint, bigint, bigint);

CREATE SEQUENCE @extschema@.channel_floor_id_seq AS bigint;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_floor_id_seq', '');

CREATE TABLE @extschema@.channel_floor (
    id bigint NOT NULL DEFAULT pg_catalog.nextval('@extschema@.channel_floor_id_seq'),
    channel_id bigint NOT NULL,
    floor_at bigint NOT NULL,
    is_raise boolean NOT NULL,
    CONSTRAINT channel_floor_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 1000
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_floor', '');

CREATE INDEX channel_floor_channel_ix
ON @extschema@.channel_floor (channel_id, id);

INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
SELECT c.id, c.floor_at, TRUE
FROM @extschema@.channel AS c
WHERE c.floor_at IS NOT NULL
ORDER BY c.id;

INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
SELECT DISTINCT k.channel_id, -9223372036854775808, FALSE
FROM @extschema@.channel_floor_mark AS k;

ALTER EXTENSION lonnymq DROP TABLE @extschema@.channel_floor_mark;

DROP TABLE @extschema@.channel_floor_mark;

ALTER TABLE @extschema@.channel DROP COLUMN floor_at;

CREATE TYPE @extschema@._channel_visit AS (
    channel @extschema@.channel,
    -- The dequeue locked the row: the channel has limits, or it moves.
    is_held boolean,
    -- How many more it may give (its free places; one with a release
    -- interval); 0 once it dropped out of the sharing.
    cap integer,
    num_taken integer,
    -- Of them, new locks (not recovered expired ones).
    num_fresh integer,
    -- Expired locks that used up max_attempts, moved to the dead letters.
    num_dead integer,
    -- The dequeue_at of the first message taken, as it was.
    first_at bigint,
    -- The channel's floor as the takes read it.
    floor_at bigint,
    -- Its last take gave less than was asked.
    came_short boolean
);

COMMENT ON TYPE @extschema@._channel_visit IS
'Internal: a channel visited by message_dequeue and what its takes got from it.';

CREATE TYPE @extschema@._delivery AS (
    -- The position of its channel among the call's visits.
    visit integer,
    id bigint,
    content bytea,
    state bytea,
    num_attempts integer,
    -- Its dequeue_at before it was taken (the lock's expiry when recovered).
    dequeue_at bigint,
    is_recovered boolean
);

COMMENT ON TYPE @extschema@._delivery IS
'Internal: a message taken by message_dequeue, returned at the end of the call.';

DROP FUNCTION @extschema@._channel_wake(bigint, bigint, bigint);

DROP FUNCTION @extschema@._schedule_run(bigint, integer, OUT integer, OUT integer);

REVOKE ALL ON FUNCTION @extschema@._clock_ms() FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_channel_name(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_lock_ms(bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_token(bigint, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_shared(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_shared(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_exclusive(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_guard_exclusive(p_channel text)
RETURNS void
LANGUAGE sql
VOLATILE
AS $$
    SELECT
        pg_catalog.pg_advisory_xact_lock(1819111681, pg_catalog.hashtext(p_channel)),
        pg_catalog.pg_advisory_xact_lock(1819111682, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_exclusive(text) IS
'Internal: take both channel guards exclusively, waiting for the producers and consumers in flight.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_exclusive(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_guard_consumer(p_channel text)
RETURNS void
LANGUAGE sql
VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock_shared(1819111682, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_consumer(text) IS
'Internal: hold the consumer guard shared until the end of the transaction (waits for channel_set, channel_drop, channel_pause).';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_consumer(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._attempt_log_append(jsonb, integer, bigint, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_access(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._check_key(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._check_size(p_name text, p_bytes bigint, p_limit bigint)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    IF p_bytes > p_limit THEN
        RAISE EXCEPTION 'lonnymq: % is % bytes, the limit is % (% MiB)', p_name, p_bytes, p_limit, p_limit / 1048576
            USING ERRCODE = '54000';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_size(text, bigint, bigint) IS
'Internal: raises 54000 when a value is larger than its limit.';

REVOKE ALL ON FUNCTION @extschema@._check_size(text, bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._dead_letter_requeued(
    p_channel @extschema@.channel,
    p_count integer,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    IF p_channel.max_size IS NOT NULL THEN
        UPDATE @extschema@.channel_quota AS q
        SET num_created = q.num_created + p_count
        WHERE q.channel_id = p_channel.id;
    END IF;
    PERFORM @extschema@._channel_arrival(p_channel, p_now, p_now);
END;
$$;

REVOKE ALL ON FUNCTION @extschema@._dead_letter_requeued(@extschema@.channel, integer, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_lock(text, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_quota_take(bigint, integer, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_for_producer(text, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_of_message(
    p_id bigint,
    p_unlocks boolean,
    p_removes boolean,
    p_returns boolean
)
RETURNS @extschema@.channel
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = (SELECT m.channel_id FROM @extschema@.message AS m WHERE m.id = p_id);
    IF p_unlocks AND v_channel.max_concurrency IS NOT NULL OR p_removes AND v_channel.max_size IS NOT NULL THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel.id
        FOR NO KEY UPDATE;
    END IF;
    IF p_returns AND v_channel.id IS NOT NULL THEN
        PERFORM @extschema@._channel_guard_shared(v_channel.name);
        SELECT c.* INTO v_channel
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel.id;
    END IF;
    RETURN v_channel;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_of_message(bigint, boolean, boolean, boolean) IS
'Internal: the channel of a message, its row locked when the call changes one of its counts and (p_returns) its guard held shared, for complete, cancel, defer and fail.';

REVOKE ALL ON FUNCTION @extschema@._channel_of_message(bigint, boolean, boolean, boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_arrival(
    p_channel @extschema@.channel,
    p_at bigint,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_ready_at bigint := pg_catalog.int8larger(p_at, p_now);
    v_read_committed boolean := pg_catalog.current_setting('transaction_isolation') = 'read committed';
    -- The floor (READ COMMITTED), or the lowest a raise may have set it.
    v_floor_at bigint;
BEGIN
    IF v_ready_at < p_channel.wait_at OR NOT v_read_committed THEN
        INSERT INTO @extschema@.channel_wake (channel_id, wake_at)
        SELECT p_channel.id, v_ready_at
        WHERE NOT EXISTS (
            SELECT 1
            FROM @extschema@.channel_wake AS w
            WHERE w.channel_id = p_channel.id AND w.wake_at <= v_ready_at
        );
    END IF;
    v_floor_at := CASE
        WHEN v_read_committed THEN @extschema@._channel_scan_from(p_channel.id)
        ELSE @extschema@._clock_ms() - 20
    END;
    IF p_at < v_floor_at THEN
        INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
        VALUES (p_channel.id, p_at, FALSE);
    END IF;
    IF p_channel.notify AND p_at <= p_now AND NOT p_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', p_channel.name);
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_arrival(@extschema@.channel, bigint, bigint) IS
'Internal: what a producer owes the consumers of a channel it put a message in: a wake-up for a waiting channel, the floor lowered below the message, a notification.';

REVOKE ALL ON FUNCTION @extschema@._channel_arrival(@extschema@.channel, bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_floor_last_raise(p_channel_id bigint)
RETURNS bigint
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    RETURN (
        SELECT r.id
        FROM @extschema@.channel_floor AS r
        WHERE r.channel_id = p_channel_id AND r.is_raise
        ORDER BY r.id DESC
        LIMIT 1
    );
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_floor_last_raise(bigint) IS
'Internal: the id of a channel''s newest floor raise row (NULL: never raised).';

REVOKE ALL ON FUNCTION @extschema@._channel_floor_last_raise(bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_release(bigint, integer, boolean, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_scan_from(p_channel_id bigint)
RETURNS bigint
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_floor_at bigint;
    v_is_raise boolean;
BEGIN
    -- Usually the newest row is the last raise, and is the floor.
    SELECT f.floor_at, f.is_raise INTO v_floor_at, v_is_raise
    FROM @extschema@.channel_floor AS f
    WHERE f.channel_id = p_channel_id
    ORDER BY f.id DESC
    LIMIT 1;
    IF NOT v_is_raise THEN
        SELECT pg_catalog.min(f.floor_at) INTO v_floor_at
        FROM @extschema@.channel_floor AS f
        WHERE
            f.channel_id = p_channel_id
            AND f.id >= @extschema@._channel_floor_last_raise(p_channel_id);
    END IF;
    RETURN COALESCE(v_floor_at, -9223372036854775808);
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_scan_from(bigint) IS
'Internal: the dequeue_at from which a channel''s messages are walked: its floor, or the beginning before its first raise.';

REVOKE ALL ON FUNCTION @extschema@._channel_scan_from(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_place(
    p_visit @extschema@._channel_visit,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel := p_visit.channel;
    v_locked integer := v_channel.num_locked;
    v_next bigint := p_now;
    v_wait bigint;
    v_head bigint;
    v_floor bigint;
    v_raise boolean := FALSE;
    v_exclusive boolean := FALSE;
    v_may_sleep boolean := FALSE;
    v_moves boolean;
BEGIN
    IF p_visit.num_taken > 0 THEN
        v_next := p_now + v_channel.release_interval_ms;
        -- The floor is behind: both the first message taken and the clock
        -- 20 ms back are more than 20 ms past it (so the walks of a channel
        -- whose consumers keep up start at most about 40 ms of messages
        -- behind its head, which under a long-open snapshot is what each
        -- walk reads; at most 50 raises a second); or the first message
        -- taken was below it (an expired lock).
        v_raise := pg_catalog.int8smaller(p_visit.first_at, p_now - 20) > p_visit.floor_at + 20 OR p_visit.first_at < p_visit.floor_at;
    END IF;
    IF v_channel.max_concurrency IS NOT NULL THEN
        v_locked := pg_catalog.int4larger(v_locked + p_visit.num_fresh - p_visit.num_dead, 0);
    END IF;

    IF v_locked >= v_channel.max_concurrency THEN
        SELECT m.dequeue_at INTO v_head
        FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel.id AND m.is_locked AND m.is_counted
        ORDER BY m.dequeue_at, m.id
        LIMIT 1;
        -- No lock at all although the count says full: the count is wrong;
        -- repair it rather than stall.
        v_locked := CASE WHEN v_head IS NULL THEN 0 ELSE v_locked END;
        v_next := GREATEST(v_next, v_head);
    ELSE
        -- Is anything deliverable left?  The probe walks from the floor,
        -- over the entries of the messages this call just took from the
        -- channel: so it asks only when that is at most one, or when the
        -- take came up short (it walked as far itself).  A channel that
        -- filled a larger share is left to its next visit, which finds out.
        v_may_sleep := (p_visit.num_taken <= 1 OR p_visit.came_short) AND (p_visit.num_taken = 0 OR p_visit.is_held);
    END IF;

    -- The probe: the channel's first message, not SKIP LOCKED (a message
    -- another transaction holds right now, and may roll back, keeps the
    -- channel in the rotation).  When it says the channel may sleep, or
    -- the floor is to be raised, it runs again after the guard is taken
    -- exclusively: that snapshot sees every message put in the channel,
    -- with the floor it lowered (read again), and decides both.
    FOR v_probe IN 1..2 LOOP
        IF v_may_sleep OR v_exclusive THEN
            SELECT m.dequeue_at INTO v_head
            FROM @extschema@.message AS m
            WHERE
                m.channel_id = v_channel.id
                AND m.dequeue_at >= CASE
                    WHEN v_exclusive OR p_visit.floor_at IS NULL THEN @extschema@._channel_scan_from(v_channel.id)
                    ELSE p_visit.floor_at
                END
            ORDER BY m.dequeue_at, m.id
            LIMIT 1;
        END IF;
        IF v_exclusive THEN
            IF v_may_sleep AND NOT v_head <= p_now IS TRUE THEN
                v_wait := COALESCE(v_head, 9223372036854775807);
                v_next := GREATEST(v_next, v_head);
            END IF;
            IF v_raise THEN
                -- The new floor supersedes every row from the last raise on
                -- (no producer is in flight to add one meanwhile).
                v_floor := pg_catalog.int8smaller(p_now - 20, COALESCE(v_head, p_now - 20));
                DELETE FROM @extschema@.channel_floor AS f
                WHERE
                    f.channel_id = v_channel.id
                    AND f.id >= COALESCE(@extschema@._channel_floor_last_raise(v_channel.id), 0);
                INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
                VALUES (v_channel.id, v_floor, TRUE);
            END IF;
            EXIT;
        END IF;
        EXIT WHEN NOT (v_raise OR v_may_sleep AND NOT v_head <= p_now IS TRUE);
        v_exclusive := pg_catalog.current_setting('transaction_isolation') = 'read committed'
            AND @extschema@._channel_guard_try_exclusive(v_channel.name);
        EXIT WHEN NOT v_exclusive;
    END LOOP;

    IF NOT p_visit.is_held AND v_wait IS NULL AND p_visit.num_dead = 0 THEN
        RETURN;
    END IF;

    -- A channel this call holds, or puts to sleep, goes to its new place;
    -- any other keeps its place: only its counts are written.
    v_moves := p_visit.is_held OR v_wait IS NOT NULL;
    UPDATE @extschema@.channel AS c
    SET
        next_at = CASE
            WHEN NOT v_moves THEN c.next_at
            WHEN v_wait = 9223372036854775807 THEN NULL
            ELSE v_next
        END,
        turn = CASE
            WHEN NOT v_moves THEN c.turn
            WHEN v_wait = 9223372036854775807 THEN NULL
            ELSE pg_catalog.nextval('@extschema@.channel_turn_seq')
        END,
        wait_at = CASE WHEN v_moves THEN v_wait ELSE c.wait_at END,
        last_served_at = CASE WHEN v_moves AND p_visit.num_taken > 0 THEN p_now ELSE c.last_served_at END,
        num_locked = v_locked,
        num_removed = c.num_removed + CASE WHEN c.max_size IS NULL THEN 0 ELSE p_visit.num_dead END
    -- Not held: unless another consumer has moved it since, or holds it
    -- (it is placing it).  Removals are counted in any case: then it waits.
    WHERE
        c.id = v_channel.id
        AND (
            p_visit.is_held OR p_visit.num_dead > 0
            OR c.id = (
                SELECT o.id
                FROM @extschema@.channel AS o
                WHERE o.id = v_channel.id AND o.turn IS NOT DISTINCT FROM v_channel.turn
                FOR NO KEY UPDATE SKIP LOCKED
            )
        );
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_place(@extschema@._channel_visit, bigint) IS
'Internal: decide and write where a channel visited by message_dequeue goes next: the back of the rotation, waiting for a lock''s expiry, asleep, or (alone and without limits) where it is.';

REVOKE ALL ON FUNCTION @extschema@._channel_place(@extschema@._channel_visit, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._message_head(
    p_channel_id bigint,
    p_from bigint,
    p_now bigint,
    p_count integer,
    p_expired_only boolean
)
RETURNS TABLE (id bigint, dequeue_at bigint, is_locked boolean, num_attempts integer)
LANGUAGE plpgsql
VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    IF p_expired_only THEN
        RETURN QUERY
        SELECT m.id, m.dequeue_at, m.is_locked, m.num_attempts
        FROM @extschema@.message AS m
        WHERE
            m.channel_id = p_channel_id
            AND m.is_locked AND m.is_counted AND m.dequeue_at <= p_now
        ORDER BY m.dequeue_at, m.id
        LIMIT p_count
        FOR UPDATE SKIP LOCKED;
    ELSE
        RETURN QUERY
        SELECT q.id, q.dequeue_at, q.is_locked, q.num_attempts
        FROM @extschema@.message AS q
        WHERE q.channel_id = p_channel_id AND q.dequeue_at BETWEEN p_from AND p_now
        ORDER BY q.dequeue_at, q.id
        LIMIT p_count
        FOR UPDATE SKIP LOCKED;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_head(bigint, bigint, bigint, integer, boolean) IS
'Internal: lock the messages a take of message_dequeue delivers: a channel''s first deliverable ones from its floor, or at max_concurrency its expired locks (SKIP LOCKED).';

REVOKE ALL ON FUNCTION @extschema@._message_head(bigint, bigint, bigint, integer, boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._message_key_claim(bigint, text, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._message_key_release(bigint, text, bigint, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._message_bury(bigint, bigint, text, text, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._backoff_ms(@extschema@.channel, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._schedule_run(p_now bigint, p_limit integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_schedule record;
    v_due bigint;
    v_missed bigint;
    v_created integer := 0;
BEGIN
    FOR v_schedule IN
        SELECT s.name, s.channel, s.content, s.every_ms, s.next_at
        FROM @extschema@.schedule AS s
        WHERE s.next_at <= p_now
        ORDER BY s.next_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        CONTINUE WHEN NOT @extschema@._channel_guard_try_shared(v_schedule.channel);
        -- A size-limited channel's producers serialise on its quota row
        -- (only such a channel has one): take it now if free, else leave
        -- the schedule for a later caller (message_dequeue never waits for
        -- a producer's transaction).
        PERFORM 1
        FROM @extschema@.channel_quota AS q
        INNER JOIN @extschema@.channel AS c ON c.id = q.channel_id
        WHERE c.name = v_schedule.channel
        FOR UPDATE OF q SKIP LOCKED;
        CONTINUE WHEN NOT FOUND AND EXISTS (
            SELECT 1 FROM @extschema@.channel AS c WHERE c.name = v_schedule.channel AND c.max_size IS NOT NULL
        );
        -- In numeric: a schedule stored by 0.7.0 may start anywhere in
        -- bigint, and p_now - next_at overflowed (every dequeue failed).
        v_missed := LEAST(
            pg_catalog.div(p_now::numeric - v_schedule.next_at, v_schedule.every_ms), 9223372036854775807
        );
        v_due := p_now - pg_catalog.mod(p_now::numeric - v_schedule.next_at, v_schedule.every_ms);
        IF @extschema@.message_create(v_schedule.channel, v_schedule.content, v_due) IS NOT NULL THEN
            v_created := v_created + 1;
        END IF;
        UPDATE @extschema@.schedule AS s
        SET
            next_at = v_due + v_schedule.every_ms,
            last_run_at = p_now,
            num_runs = s.num_runs + 1,
            num_missed = LEAST(s.num_missed::numeric + v_missed, 9223372036854775807)
        WHERE s.name = v_schedule.name;
    END LOOP;
    RETURN v_created;
END;
$$;

COMMENT ON FUNCTION @extschema@._schedule_run(bigint, integer) IS
'Internal: create the messages of up to p_limit due schedules, one per schedule (missed periods coalesced); returns how many messages were created.';

REVOKE ALL ON FUNCTION @extschema@._schedule_run(bigint, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._access_functions(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._access_apply(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.grant_access(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.revoke_access(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean
) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.channel_drop(
    p_channel text,
    p_purge boolean DEFAULT FALSE
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channel_id bigint;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    IF p_purge IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_purge must not be NULL'
            USING ERRCODE = '22004';
    END IF;

    SELECT c.id INTO v_channel_id
    FROM @extschema@.channel AS c
    WHERE c.name = p_channel
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    PERFORM @extschema@._channel_guard_exclusive(p_channel);

    IF NOT p_purge AND EXISTS (
        SELECT 1 FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel_id
    ) THEN
        RAISE EXCEPTION 'lonnymq: channel "%" still holds messages', p_channel
            USING ERRCODE = '55006',
            HINT = 'Pass p_purge => true to delete them with the channel.';
    END IF;

    DELETE FROM @extschema@.message AS m WHERE m.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel_wake AS w WHERE w.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel_floor AS f WHERE f.channel_id = v_channel_id;
    DELETE FROM @extschema@.message_key AS k WHERE k.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel_quota AS q WHERE q.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel AS c WHERE c.id = v_channel_id;
    RETURN TRUE;
END;
$$;

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
        PERFORM @extschema@._check_size('p_content', pg_catalog.octet_length(p_content), 16777216);
    END IF;
    IF p_key IS NOT NULL THEN
        PERFORM @extschema@._check_key(p_key);
    END IF;

    v_now := @extschema@._clock_ms();
    -- The default is the transaction's start, so that messages created in one
    -- transaction share a dequeue_at and keep their order by id.
    v_dequeue_at := COALESCE(p_dequeue_at, @extschema@.to_epoch(pg_catalog.now()));
    v_channel := @extschema@._channel_for_producer(p_channel, v_now);
    v_id := pg_catalog.nextval('@extschema@.message_id_seq');
    IF p_key IS NOT NULL THEN
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

    INSERT INTO @extschema@.message (id, channel_id, dequeue_at, created_at, content, key)
    VALUES (v_id, v_channel.id, v_dequeue_at, v_now, p_content, p_key);

    PERFORM @extschema@._channel_arrival(v_channel, v_dequeue_at, v_now);
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
    IF p_channel IS NULL OR pg_catalog.length(p_channel) NOT BETWEEN 1 AND 255 THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
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
    PERFORM @extschema@._check_size('a content', v_largest, 16777216);
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
        PERFORM @extschema@._channel_arrival(v_channel, v_ready_at, v_now);
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
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
    v_key text;
BEGIN
    IF p_id IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_id must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    v_channel := @extschema@._channel_of_message(p_id, FALSE, TRUE, FALSE);
    IF v_channel.id IS NULL THEN
        RETURN FALSE;
    END IF;
    DELETE FROM @extschema@.message AS m
    WHERE m.id = p_id AND NOT m.is_locked
    RETURNING m.key INTO v_key;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    IF v_key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(v_channel.id, v_key, p_id, 0, 0);
    END IF;
    UPDATE @extschema@.channel AS c
    SET num_removed = c.num_removed + 1
    WHERE c.id = v_channel.id AND c.max_size IS NOT NULL;
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
AS $$
#variable_conflict use_column
DECLARE
    v_now bigint;
    v_limit integer := COALESCE(p_limit, 1);
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
    v_changed boolean;
    v_min_at bigint;
    i integer;
    -- The messages taken, returned in rotation order at the end.
    v_out @extschema@._delivery[] := '{}';
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
    v_remaining := v_limit;
    WHILE v_remaining > 0 LOOP
        -- 1 and 2. The front of the rotation (one more channel than is
        -- served: is the first one alone?), and whether anything is due.
        -- After the due wake-ups were applied, the channels of those left
        -- (another consumer is applying them right now: SKIP LOCKED below)
        -- are served after the front when it is short, read in the same
        -- snapshot, so that their consumers never find them empty meanwhile.
        SELECT
            NOT v_applied AND EXISTS (
                SELECT 1 FROM @extschema@.schedule AS s WHERE s.next_at <= k.now
            ),
            NOT v_applied AND EXISTS (
                SELECT 1 FROM @extschema@.channel_wake AS w WHERE w.wake_at <= k.now
            ),
            f.front || ARRAY(
                SELECT c
                FROM @extschema@.channel AS c
                WHERE
                    v_applied AND pg_catalog.cardinality(f.front) < v_remaining
                    AND c.id IN (
                        SELECT w.channel_id
                        FROM @extschema@.channel_wake AS w
                        WHERE w.wake_at <= k.now
                        ORDER BY w.wake_at, w.id
                        LIMIT 8
                    )
                    AND NOT c.is_paused AND NOT COALESCE(c.next_at <= k.now, FALSE) AND c.id <> ALL(v_seen)
                    AND c.name = COALESCE(p_channel, c.name)
            ),
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
                        turn = CASE
                            WHEN v_next IS DISTINCT FROM c.next_at
                                THEN pg_catalog.nextval('@extschema@.channel_turn_seq')
                            ELSE c.turn
                        END
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
                LEAST(
                    CASE
                        WHEN v_channel.num_locked >= v_channel.max_concurrency THEN v_limit
                        ELSE COALESCE(v_channel.max_concurrency - v_channel.num_locked, v_limit)
                    END,
                    CASE WHEN v_channel.release_interval_ms > 0 THEN 1 ELSE v_limit END
                ),
                0, 0, 0, NULL, NULL, FALSE
            )::@extschema@._channel_visit;
        END LOOP;

        -- 3. Share what is left among the live channels: equal shares, the
        -- remainder to the first ones in turn order; a channel that gives
        -- less than its share drops out and the rest is shared again.
        v_live := pg_catalog.cardinality(v_visits) - v_first + 1;
        LOOP
            EXIT WHEN v_live <= 0 OR v_remaining = 0;
            v_share := v_remaining / v_live;
            v_extra := v_remaining % v_live;
            v_rank := 0;
            v_changed := FALSE;
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
                -- An expired lock that used up max_attempts is not taken but
                -- goes to the dead letters, and is replaced (each freed a
                -- place): at most v_limit + 16 buried per channel.
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
                            num_attempts = m.num_attempts + 1,
                            attempt_log = CASE
                                WHEN m.is_locked THEN
                                    @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, v_now, 'lock expired')
                                ELSE m.attempt_log
                            END
                        FROM head AS h
                        WHERE
                            m.id = h.id
                            AND NOT (h.is_locked AND h.num_attempts >= v_channel.max_attempts) IS TRUE
                        RETURNING m.id, m.content, m.state, m.num_attempts, h.dequeue_at AS old_at, h.is_locked AS old_locked
                    )

                    SELECT
                        pg_catalog.count(*),
                        pg_catalog.count(*) FILTER (WHERE NOT t.old_locked),
                        pg_catalog.min(t.old_at),
                        v_out || pg_catalog.array_agg(
                            ROW(i, t.id, t.content, t.state, t.num_attempts, t.old_at, t.old_locked)::@extschema@._delivery
                        ),
                        ARRAY(
                            SELECT h.id
                            FROM head AS h
                            WHERE h.is_locked AND h.num_attempts >= v_channel.max_attempts
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
                v_changed := v_changed OR v_got > 0;
                v_visit.num_taken := v_visit.num_taken + v_got;
                v_visit.cap := v_visit.cap - v_got;
                v_remaining := v_remaining - v_got;
                v_visit.came_short := v_got < v_want;
                IF v_got < v_want OR v_visit.cap <= 0 THEN
                    -- It drops out.
                    v_visit.cap := 0;
                    v_live := v_live - 1;
                    v_changed := TRUE;
                END IF;
                v_visits[i] := v_visit;
            END LOOP;
            EXIT WHEN NOT v_changed;
        END LOOP;

        EXIT WHEN v_busy_turn OR p_channel IS NOT NULL AND pg_catalog.cardinality(v_busy) = 0;
    END LOOP;

    -- 4. Where each visited channel goes next, in the order of its last
    -- delivery in this batch (those that gave nothing first).
    FOR i IN
        SELECT k.ordinality
        FROM pg_catalog.unnest(v_visits) WITH ORDINALITY AS k
        ORDER BY k.num_taken - 1, k.ordinality
    LOOP
        PERFORM @extschema@._channel_place(v_visits[i], v_now);
    END LOOP;

    RETURN QUERY
    SELECT d.id, ((v_visits[d.visit]).channel).name, d.content, d.state, d.num_attempts, d.dequeue_at, d.is_recovered
    FROM pg_catalog.unnest(v_out) AS d
    ORDER BY pg_catalog.row_number() OVER (PARTITION BY d.visit ORDER BY d.dequeue_at, d.id), d.visit;
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
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
    v_gone record;
    v_key text;
    v_now bigint;
BEGIN
    IF p_id IS NULL OR p_num_attempts IS NULL THEN
        PERFORM @extschema@._check_token(p_id, p_num_attempts);
    END IF;
    v_channel := @extschema@._channel_of_message(p_id, TRUE, TRUE, FALSE);
    IF v_channel.id IS NULL THEN
        RETURN FALSE;
    END IF;
    v_now := @extschema@._clock_ms();
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
    -- After the DELETE, even for a channel that had no limits at the
    -- lookup, so that a limit that channel_set committed meanwhile (it
    -- waits for this message's row lock) is seen, and counted.
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
AS $$
DECLARE
    v_now bigint;
    v_dequeue_at bigint;
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    IF pg_catalog.octet_length(p_state) > 16777216 THEN
        PERFORM @extschema@._check_size('p_state', pg_catalog.octet_length(p_state), 16777216);
    END IF;
    v_now := @extschema@._clock_ms();
    v_dequeue_at := COALESCE(p_dequeue_at, v_now);

    v_channel := @extschema@._channel_of_message(p_id, TRUE, FALSE, TRUE);
    IF v_channel.id IS NULL THEN
        RETURN FALSE;
    END IF;

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

    PERFORM @extschema@._channel_release(v_channel.id, 1, FALSE, v_now);
    -- Like a producer: the message may now be deliverable before the time a
    -- waiting channel will next be looked at, or below its floor.
    PERFORM @extschema@._channel_arrival(v_channel, v_dequeue_at, v_now);
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
SET enable_hashjoin = on
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

    -- One DELETE: one primary-key probe per (id, token) pair, the pairs
    -- driving the join.  (Not "m.id = ANY(p_ids)" besides: the planner then
    -- scanned the messages first and rescanned every pair for each of them,
    -- n x n comparisons.)  The rows of channels that retain history are
    -- copied (none when v_history_ids is NULL).
    WITH gone AS (
        DELETE FROM @extschema@.message AS m
        USING ROWS FROM (
            pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)
        ) AS t (id, num_attempts)
        WHERE
            m.id = t.id
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
AS $$
DECLARE
    v_now bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_dequeue_at bigint;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    PERFORM @extschema@._check_size('p_error', pg_catalog.octet_length(p_error), 1048576);
    v_channel := @extschema@._channel_of_message(p_id, TRUE, TRUE, TRUE);
    IF v_channel.id IS NULL THEN
        RETURN NULL;
    END IF;
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
            p_id, v_channel.id, v_channel.name, p_error, v_now, v_channel.dedup_window_ms
        );
        PERFORM @extschema@._channel_release(v_channel.id, 1, TRUE, v_now);
        RETURN 'dead';
    END IF;

    v_dequeue_at := v_now + @extschema@._backoff_ms(v_channel, p_num_attempts);
    UPDATE @extschema@.message AS m
    SET
        is_locked = FALSE,
        dequeue_at = v_dequeue_at,
        attempt_log = @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, v_now, p_error)
    WHERE m.id = p_id;
    PERFORM @extschema@._channel_release(v_channel.id, 1, FALSE, v_now);
    PERFORM @extschema@._channel_arrival(v_channel, v_dequeue_at, v_now);
    RETURN 'retry';
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.message_fail(bigint, integer, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.dead_letter_redrive(text, bigint[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.history_prune(p_older_than_ms bigint)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count bigint;
    v_cutoff bigint;
BEGIN
    IF p_older_than_ms IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_older_than_ms must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_older_than_ms < 0 THEN
        RAISE EXCEPTION 'lonnymq: p_older_than_ms must be at least 0, got %', p_older_than_ms
            USING ERRCODE = '22023';
    END IF;
    -- Through message_history_completed_ix (the entry points' settings): the
    -- cost is in proportion to the rows deleted, however large the history.
    v_cutoff := @extschema@._clock_ms() - p_older_than_ms;
    DELETE FROM @extschema@.message_history AS h
    WHERE h.completed_at <= v_cutoff;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.history_prune(bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.dead_letter_delete(text, bigint[], boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.schedule_set(
    p_name text,
    p_channel text,
    p_content bytea,
    p_every_ms bigint,
    p_start_at bigint DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_start bigint;
BEGIN
    IF p_name IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_name must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.length(p_name) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'lonnymq: a schedule name must be 1 to 255 characters, got %',
            pg_catalog.length(p_name)
            USING ERRCODE = '22023';
    END IF;
    PERFORM @extschema@._check_channel_name(p_channel);
    IF p_content IS NULL OR p_every_ms IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_content and p_every_ms must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    PERFORM @extschema@._check_size('p_content', pg_catalog.octet_length(p_content), 16777216);
    IF p_every_ms NOT BETWEEN 1 AND 31536000000 THEN
        RAISE EXCEPTION 'lonnymq: p_every_ms must be between 1 and 31536000000 (365 days), got %',
            p_every_ms
            USING ERRCODE = '22023';
    END IF;
    -- Years 1 to 9999: every period boundary of such a schedule, and its
    -- distance from any clock reading, fits a bigint.
    IF p_start_at NOT BETWEEN -62135596800000 AND 253402300799999 THEN
        RAISE EXCEPTION 'lonnymq: p_start_at must be between -62135596800000 and 253402300799999 (years 1 to 9999), got %',
            p_start_at
            USING ERRCODE = '22023';
    END IF;
    v_now := @extschema@._clock_ms();
    v_start := COALESCE(p_start_at, v_now);
    INSERT INTO @extschema@.schedule AS s (
        name, channel, content, every_ms, start_at, next_at, created_at
    )
    VALUES (p_name, p_channel, p_content, p_every_ms, v_start, v_start, v_now)
    ON CONFLICT (name) DO UPDATE
        SET
            channel = excluded.channel,
            content = excluded.content,
            every_ms = excluded.every_ms,
            start_at = CASE
                WHEN s.every_ms = excluded.every_ms AND (p_start_at IS NULL OR s.start_at = excluded.start_at)
                    THEN s.start_at
                ELSE excluded.start_at
            END,
            next_at = CASE
                WHEN s.every_ms = excluded.every_ms AND (p_start_at IS NULL OR s.start_at = excluded.start_at)
                    THEN s.next_at
                ELSE excluded.next_at
            END;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.schedule_set(text, text, bytea, bigint, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.schedule_drop(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.tick()
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_created integer := 0;
BEGIN
    v_now := @extschema@._clock_ms();
    -- Every due schedule (up to 10000 a call), one pass: a schedule whose
    -- channel is busy right now is skipped and left for the next call.
    v_created := @extschema@._schedule_run(v_now, 10000);
    -- Expired claims, 100 at a time (a nested loop of primary-key probes;
    -- one big DELETE would be planned as a hash join over the whole table).
    FOR v_try IN 1..100 LOOP
        DELETE FROM @extschema@.message_key AS k
        USING (
            SELECT e.channel_id, e.key
            FROM @extschema@.message_key AS e
            WHERE e.expires_at <= v_now
            ORDER BY e.expires_at
            LIMIT 100
            FOR UPDATE SKIP LOCKED
        ) AS x
        WHERE k.channel_id = x.channel_id AND k.key = x.key;
        EXIT WHEN NOT FOUND;
    END LOOP;
    RETURN v_created;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.tick() FROM PUBLIC;

DO $$
DECLARE
    v_setting record;
BEGIN
    FOR v_setting IN
        SELECT p.oid::pg_catalog.regprocedure AS signature, s.name, s.value
        FROM pg_catalog.pg_proc AS p
        INNER JOIN pg_catalog.pg_depend AS d
            ON
                d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid
                AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
        INNER JOIN pg_catalog.pg_extension AS e ON e.oid = d.refobjid AND e.extname = 'lonnymq'
        CROSS JOIN (
            VALUES
            ('plan_cache_mode', 'force_generic_plan'),
            ('enable_seqscan', 'off'),
            ('enable_bitmapscan', 'off'),
            ('enable_mergejoin', 'off'),
            ('enable_hashjoin', 'off')
        ) AS s (name, value)
        WHERE
            p.prosecdef
            AND NOT EXISTS (
                SELECT 1
                FROM pg_catalog.unnest(p.proconfig) AS c (setting)
                WHERE pg_catalog.split_part(c.setting, '=', 1) = s.name
            )
        ORDER BY p.oid, s.name
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET %I = %L', v_setting.signature, v_setting.name, v_setting.value);
    END LOOP;
END;
$$;

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
