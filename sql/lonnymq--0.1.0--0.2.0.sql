-- lonnymq 0.1.0 -> 0.2.0 as released, without the statements that changed nothing (the
-- functions and comments it re-created as they were: tools/build_upgrade.py).
\echo Use "ALTER EXTENSION lonnymq UPDATE TO '0.2.0'" to load this file. \quit

DROP FUNCTION @extschema@.channel_set(text, integer, integer, bigint);

DROP FUNCTION @extschema@.message_create(text, bytea, bigint);

DROP FUNCTION @extschema@._message_take(bigint, bigint, bigint, integer, boolean);

DROP FUNCTION @extschema@._channel_release(bigint, boolean, bigint);

ALTER TABLE @extschema@.channel
ADD COLUMN is_paused boolean NOT NULL DEFAULT FALSE,
ADD COLUMN max_attempts integer,
ADD COLUMN backoff_base_ms bigint NOT NULL DEFAULT 1000,
ADD COLUMN backoff_factor double precision NOT NULL DEFAULT 2.0,
ADD COLUMN backoff_max_ms bigint NOT NULL DEFAULT 3600000,
ADD COLUMN backoff_jitter double precision NOT NULL DEFAULT 0.1,
ADD COLUMN dedup_window_ms bigint NOT NULL DEFAULT 0,
ADD COLUMN retain_history boolean NOT NULL DEFAULT FALSE,
ADD COLUMN notify boolean NOT NULL DEFAULT FALSE,
ADD CONSTRAINT channel_max_attempts_check CHECK (max_attempts >= 1),
ADD CONSTRAINT channel_backoff_check CHECK (
    backoff_base_ms BETWEEN 0 AND 31536000000
    AND backoff_factor BETWEEN 1.0 AND 1000.0
    AND backoff_max_ms BETWEEN 0 AND 31536000000
    AND backoff_jitter BETWEEN 0.0 AND 1.0
),
ADD CONSTRAINT channel_dedup_window_check CHECK (
    dedup_window_ms BETWEEN 0 AND 31536000000
);

ALTER TABLE @extschema@.message
ADD COLUMN key text,
ADD COLUMN attempt_log jsonb;

CREATE TABLE @extschema@.message_key (
    channel_id bigint NOT NULL,
    key text NOT NULL,
    message_id bigint NOT NULL,
    expires_at bigint,
    CONSTRAINT message_key_pkey PRIMARY KEY (channel_id, key)
) WITH (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message_key', '');

CREATE INDEX message_key_expiry_ix
ON @extschema@.message_key (expires_at)
WHERE expires_at IS NOT NULL;

CREATE TABLE @extschema@.dead_letter (
    id bigint NOT NULL,
    channel text NOT NULL,
    key text,
    content bytea NOT NULL,
    state bytea,
    num_attempts integer NOT NULL,
    created_at bigint NOT NULL,
    dead_at bigint NOT NULL,
    last_error text,
    attempt_log jsonb,
    CONSTRAINT dead_letter_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.dead_letter', '');

CREATE INDEX dead_letter_channel_ix
ON @extschema@.dead_letter (channel, id);

CREATE TABLE @extschema@.message_history (
    id bigint NOT NULL,
    channel text NOT NULL,
    key text,
    content bytea NOT NULL,
    state bytea,
    num_attempts integer NOT NULL,
    created_at bigint NOT NULL,
    completed_at bigint NOT NULL,
    CONSTRAINT message_history_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message_history', '');

CREATE INDEX message_history_completed_ix
ON @extschema@.message_history (completed_at);

CREATE TABLE @extschema@.schedule (
    name text NOT NULL,
    channel text NOT NULL,
    content bytea NOT NULL,
    every_ms bigint NOT NULL,
    start_at bigint NOT NULL,
    next_at bigint NOT NULL,
    last_run_at bigint,
    num_runs bigint NOT NULL DEFAULT 0,
    num_missed bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    CONSTRAINT schedule_pkey PRIMARY KEY (name),
    CONSTRAINT schedule_name_check CHECK (
        pg_catalog.length(name) BETWEEN 1 AND 255
    ),
    CONSTRAINT schedule_every_check CHECK (
        every_ms BETWEEN 1 AND 31536000000
    )
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_threshold = 100
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.schedule', '');

CREATE INDEX schedule_due_ix
ON @extschema@.schedule (next_at);

CREATE VIEW @extschema@.channel_stats AS
WITH clock AS (
    SELECT
        pg_catalog.floor(
            pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000
        )::bigint AS now_ms
)

SELECT
    c.name AS channel,
    n.due - l.expired AS ready,
    n.total - n.due - (l.locked - l.expired) AS scheduled,
    l.locked,
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
            pg_catalog.count(*) FILTER (WHERE m.dequeue_at <= clock.now_ms) AS due
        FROM @extschema@.message AS m
        WHERE m.channel_id = c.id
    ) AS n
CROSS JOIN
    LATERAL (
        SELECT
            pg_catalog.count(*) AS locked,
            pg_catalog.count(*) FILTER (WHERE m.dequeue_at <= clock.now_ms) AS expired
        FROM @extschema@.message AS m
        WHERE m.channel_id = c.id AND m.is_locked
    ) AS l
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

REVOKE ALL ON FUNCTION @extschema@._check_access(name, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._check_key(p_key text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    IF pg_catalog.length(p_key) NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'lonnymq: a key must be 1 to 1024 characters, got %',
            pg_catalog.length(p_key)
            USING ERRCODE = '22023';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_key(text) IS
'Internal: raises 22023 for an empty or over-long deduplication key (NULL is no key).';

REVOKE ALL ON FUNCTION @extschema@._check_key(text) FROM PUBLIC;

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
    PERFORM @extschema@._channel_wake(p_channel.id, p_channel.wait_at, p_now);
    IF p_channel.notify AND NOT p_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', p_channel.name);
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._dead_letter_requeued(@extschema@.channel, integer, bigint) IS
'Internal: account for redriven dead letters in their channel (max_size count, wake-up, notification).';

REVOKE ALL ON FUNCTION @extschema@._dead_letter_requeued(@extschema@.channel, integer, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_lock(p_channel text, p_now bigint)
RETURNS @extschema@.channel
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    FOR v_try IN 1..3 LOOP
        INSERT INTO @extschema@.channel (name, created_at)
        VALUES (p_channel, p_now)
        ON CONFLICT (name) DO NOTHING;
        SELECT c.* INTO v_channel
        FROM @extschema@.channel AS c
        WHERE c.name = p_channel
        FOR UPDATE;
        IF FOUND THEN
            RETURN v_channel;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'lonnymq: channel "%" was dropped concurrently', p_channel
        USING ERRCODE = '40001';
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_lock(text, bigint) IS
'Internal: get or create a channel, its row locked FOR UPDATE for the rest of the transaction.';

REVOKE ALL ON FUNCTION @extschema@._channel_lock(text, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_quota_take(
    p_channel_id bigint,
    p_max_size integer,
    p_want integer
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_created bigint;
    v_removed bigint;
    v_granted integer;
BEGIN
    SELECT q.num_created INTO v_created
    FROM @extschema@.channel_quota AS q
    WHERE q.channel_id = p_channel_id
    FOR UPDATE;
    SELECT c.num_removed INTO v_removed
    FROM @extschema@.channel AS c
    WHERE c.id = p_channel_id;
    v_granted := LEAST(p_want, GREATEST(p_max_size - (v_created - v_removed), 0));
    IF v_granted > 0 THEN
        UPDATE @extschema@.channel_quota AS q
        SET num_created = q.num_created + v_granted
        WHERE q.channel_id = p_channel_id;
    END IF;
    RETURN v_granted;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_quota_take(bigint, integer, integer) IS
'Internal: room for up to p_want messages in a size-limited channel, counted as created; serialises its producers.';

REVOKE ALL ON FUNCTION @extschema@._channel_quota_take(bigint, integer, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_for_producer(text, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._channel_wake(bigint, bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._channel_release(
    p_channel_id bigint,
    p_count integer,
    p_removed boolean,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    UPDATE @extschema@.channel AS c
    SET
        num_locked = CASE
            WHEN c.max_concurrency IS NULL THEN c.num_locked
            ELSE pg_catalog.int4larger(c.num_locked - p_count, 0)
        END,
        num_removed = c.num_removed + CASE
            WHEN p_removed AND c.max_size IS NOT NULL THEN p_count ELSE 0
        END,
        next_at = CASE
            WHEN c.num_locked >= c.max_concurrency AND c.next_at IS NOT NULL
                THEN LEAST(
                    c.next_at,
                    GREATEST(
                        p_now,
                        COALESCE(c.last_served_at + c.release_interval_ms, p_now)
                    )
                )
            ELSE c.next_at
        END,
        turn = CASE
            WHEN c.num_locked >= c.max_concurrency AND c.next_at IS NOT NULL
                THEN pg_catalog.nextval('@extschema@.channel_turn_seq')
            ELSE c.turn
        END
    WHERE
        c.id = p_channel_id
        AND (
            c.max_concurrency IS NOT NULL
            OR (p_removed AND c.max_size IS NOT NULL)
        );
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_release(bigint, integer, boolean, bigint) IS
'Internal: account for messages leaving their locks, on channels whose limits need it.';

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
                        COALESCE(m.attempt_log, '[]'::jsonb) || pg_catalog.jsonb_build_array(
                            pg_catalog.jsonb_build_object(
                                'attempt', m.num_attempts, 'at', p_now, 'error', 'lock expired'
                            )
                        )
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
    bigint, bigint, bigint, integer, boolean, integer, boolean, text, bigint
) IS
'Internal: lock up to p_limit deliverable messages of a channel with one index range scan, SKIP LOCKED; expired locks past max_attempts go to the dead letters.';

REVOKE ALL ON FUNCTION @extschema@._message_take(
    bigint, bigint, bigint, integer, boolean, integer, boolean, text, bigint
) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._message_key_claim(
    p_channel_id bigint,
    p_key text,
    p_message_id bigint,
    p_now bigint
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_claim record;
BEGIN
    DELETE FROM @extschema@.message_key AS k
    USING (
        SELECT e.channel_id, e.key
        FROM @extschema@.message_key AS e
        WHERE e.expires_at <= p_now
        ORDER BY e.expires_at
        LIMIT 2
        FOR UPDATE SKIP LOCKED
    ) AS x
    WHERE k.channel_id = x.channel_id AND k.key = x.key;
    FOR v_try IN 1..3 LOOP
        INSERT INTO @extschema@.message_key (channel_id, key, message_id)
        VALUES (p_channel_id, p_key, p_message_id)
        ON CONFLICT (channel_id, key) DO NOTHING;
        IF FOUND THEN
            RETURN NULL;
        END IF;
        -- Read without locking: a producer told "duplicate" must not hold
        -- up the holder's complete, cancel or dead-lettering.
        SELECT k.message_id, k.expires_at INTO v_claim
        FROM @extschema@.message_key AS k
        WHERE k.channel_id = p_channel_id AND k.key = p_key;
        IF FOUND THEN
            IF v_claim.expires_at IS NULL OR v_claim.expires_at > p_now THEN
                RETURN v_claim.message_id;
            END IF;
            -- Expired: take it over, unless someone else just did.
            UPDATE @extschema@.message_key AS k
            SET message_id = p_message_id, expires_at = NULL
            WHERE k.channel_id = p_channel_id AND k.key = p_key AND k.expires_at <= p_now;
            IF FOUND THEN
                RETURN NULL;
            END IF;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'lonnymq: key "%" keeps changing hands, retry', p_key
        USING ERRCODE = '40001';
END;
$$;

COMMENT ON FUNCTION @extschema@._message_key_claim(bigint, text, bigint, bigint) IS
'Internal: claim a deduplication key for a new message; returns the id of the message holding it, or NULL when claimed.';

REVOKE ALL ON FUNCTION @extschema@._message_key_claim(bigint, text, bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._message_key_release(
    p_channel_id bigint,
    p_key text,
    p_message_id bigint,
    p_window_ms bigint,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    IF p_window_ms > 0 THEN
        UPDATE @extschema@.message_key AS k
        SET expires_at = p_now + p_window_ms
        WHERE
            k.channel_id = p_channel_id
            AND k.key = p_key
            AND k.message_id = p_message_id;
    ELSE
        DELETE FROM @extschema@.message_key AS k
        WHERE
            k.channel_id = p_channel_id
            AND k.key = p_key
            AND k.message_id = p_message_id;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_key_release(bigint, text, bigint, bigint, bigint) IS
'Internal: a keyed message left the queue: its claim lasts the dedup window, or goes at once.';

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
        COALESCE(g.attempt_log, '[]'::jsonb) || pg_catalog.jsonb_build_array(
            pg_catalog.jsonb_build_object('attempt', g.num_attempts, 'at', p_now, 'error', p_error)
        )
    FROM gone AS g
    RETURNING key INTO v_key;
    IF v_key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(p_channel_id, v_key, p_id, p_window_ms, p_now);
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_bury(bigint, bigint, text, text, bigint, bigint) IS
'Internal: move a locked message to the dead letters, logging its last error.';

REVOKE ALL ON FUNCTION @extschema@._message_bury(bigint, bigint, text, text, bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._backoff_ms(
    p_channel @extschema@.channel,
    p_attempt integer
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_delay double precision;
BEGIN
    IF p_channel.backoff_base_ms = 0 OR p_channel.backoff_max_ms = 0 THEN
        RETURN 0;
    END IF;
    IF pg_catalog.ln(p_channel.backoff_base_ms::double precision)
        + pg_catalog.ln(p_channel.backoff_factor) * pg_catalog.int4larger(p_attempt - 1, 0)
        >= pg_catalog.ln(p_channel.backoff_max_ms::double precision) THEN
        v_delay := p_channel.backoff_max_ms;
    ELSE
        v_delay := p_channel.backoff_base_ms
            * p_channel.backoff_factor ^ pg_catalog.int4larger(p_attempt - 1, 0);
    END IF;
    RETURN pg_catalog.floor(v_delay * (1.0 - p_channel.backoff_jitter * pg_catalog.random()))::bigint;
END;
$$;

COMMENT ON FUNCTION @extschema@._backoff_ms(@extschema@.channel, integer) IS
'Internal: the retry delay of a channel''s backoff policy after a failed attempt.';

REVOKE ALL ON FUNCTION @extschema@._backoff_ms(@extschema@.channel, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._schedule_run(
    p_now bigint,
    p_limit integer,
    OUT created integer,
    OUT processed integer
)
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_schedule record;
    v_due bigint;
    v_missed bigint;
BEGIN
    created := 0;
    processed := 0;
    FOR v_schedule IN
        SELECT s.name, s.channel, s.content, s.every_ms, s.next_at
        FROM @extschema@.schedule AS s
        WHERE s.next_at <= p_now
        ORDER BY s.next_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        CONTINUE WHEN NOT @extschema@._channel_guard_try_shared(v_schedule.channel);
        -- A size-limited channel's producers serialise on its quota row:
        -- take it now if free, else leave the schedule for a later caller
        -- (message_dequeue never waits for a producer's transaction).
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.name = v_schedule.channel AND c.max_size IS NOT NULL;
        IF FOUND THEN
            PERFORM 1
            FROM @extschema@.channel_quota AS q
            INNER JOIN @extschema@.channel AS c ON c.id = q.channel_id
            WHERE c.name = v_schedule.channel
            FOR UPDATE OF q SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
        END IF;
        v_missed := (p_now - v_schedule.next_at) / v_schedule.every_ms;
        v_due := v_schedule.next_at + v_missed * v_schedule.every_ms;
        IF @extschema@.message_create(v_schedule.channel, v_schedule.content, v_due) IS NOT NULL THEN
            created := created + 1;
        END IF;
        UPDATE @extschema@.schedule AS s
        SET
            next_at = v_due + v_schedule.every_ms,
            last_run_at = p_now,
            num_runs = s.num_runs + 1,
            num_missed = s.num_missed + v_missed
        WHERE s.name = v_schedule.name;
        processed := processed + 1;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@._schedule_run(bigint, integer, OUT integer, OUT integer) IS
'Internal: create the messages of up to p_limit due schedules, one per schedule (missed periods coalesced); returns how many messages were created and how many schedules advanced.';

REVOKE ALL ON FUNCTION @extschema@._schedule_run(bigint, integer, OUT integer, OUT integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@._access_functions(p_access text)
RETURNS SETOF regprocedure
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT f.fn::regprocedure
    FROM (
        VALUES
        ('producer', '@extschema@.to_epoch(timestamptz)'),
        ('producer', '@extschema@.message_create(text, bytea, bigint, text)'),
        ('producer', '@extschema@.message_create_batch(text, bytea[], bigint[], text[])'),
        ('consumer', '@extschema@.to_epoch(timestamptz)'),
        ('consumer', '@extschema@.message_dequeue(bigint, integer, text)'),
        ('consumer', '@extschema@.message_complete(bigint, integer)'),
        ('consumer', '@extschema@.message_complete_batch(bigint[], integer[])'),
        ('consumer', '@extschema@.message_defer(bigint, integer, bigint, bytea)'),
        ('consumer', '@extschema@.message_heartbeat(bigint, integer, bigint)'),
        ('consumer', '@extschema@.message_fail(bigint, integer, text)'),
        ('admin', '@extschema@.to_epoch(timestamptz)'),
        ('admin', '@extschema@.message_create(text, bytea, bigint, text)'),
        ('admin', '@extschema@.message_create_batch(text, bytea[], bigint[], text[])'),
        ('admin', '@extschema@.message_dequeue(bigint, integer, text)'),
        ('admin', '@extschema@.message_complete(bigint, integer)'),
        ('admin', '@extschema@.message_complete_batch(bigint[], integer[])'),
        ('admin', '@extschema@.message_defer(bigint, integer, bigint, bytea)'),
        ('admin', '@extschema@.message_heartbeat(bigint, integer, bigint)'),
        ('admin', '@extschema@.message_fail(bigint, integer, text)'),
        ('admin', '@extschema@.channel_set(text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint, boolean, boolean)'),
        ('admin', '@extschema@.channel_drop(text, boolean)'),
        ('admin', '@extschema@.channel_pause(text)'),
        ('admin', '@extschema@.channel_resume(text)'),
        ('admin', '@extschema@.message_cancel(bigint)'),
        ('admin', '@extschema@.dead_letter_redrive(text, bigint[])'),
        ('admin', '@extschema@.dead_letter_delete(text, bigint[], boolean)'),
        ('admin', '@extschema@.history_prune(bigint)'),
        ('admin', '@extschema@.schedule_set(text, text, bytea, bigint, bigint)'),
        ('admin', '@extschema@.schedule_drop(text)'),
        ('admin', '@extschema@.tick()')
    ) AS f (access, fn)
    WHERE f.access = p_access
$$;

REVOKE ALL ON FUNCTION @extschema@._access_functions(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@._access_apply(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.grant_access(name, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION @extschema@.revoke_access(name, text) FROM PUBLIC;

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
    PERFORM 1
    FROM @extschema@.message AS m
    WHERE m.channel_id = v_channel.id AND m.is_locked
    FOR SHARE;

    IF p_max_concurrency IS NOT NULL THEN
        SELECT pg_catalog.count(*) INTO v_locked
        FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel.id AND m.is_locked;
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

COMMENT ON FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean
) IS
'Create a channel or set its whole configuration: max_concurrency (messages locked at once), max_size (messages held), release_interval_ms (minimum gap between deliveries), the retry policy (max_attempts, backoff), dedup_window_ms, retain_history, notify. NULL limits mean unlimited; omitted parameters take their defaults.';

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
    DELETE FROM @extschema@.message_key AS k WHERE k.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel_quota AS q WHERE q.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel AS c WHERE c.id = v_channel_id;
    RETURN TRUE;
END;
$$;

REVOKE ALL ON FUNCTION @extschema@.channel_drop(text, boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.channel_pause(p_channel text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    v_channel := @extschema@._channel_lock(p_channel, @extschema@._clock_ms());
    IF v_channel.is_paused THEN
        RETURN FALSE;
    END IF;
    PERFORM @extschema@._channel_guard_exclusive(p_channel);
    UPDATE @extschema@.channel AS c
    SET
        is_paused = TRUE,
        next_at = NULL,
        turn = NULL,
        wait_at = NULL
    WHERE c.id = v_channel.id;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_pause(text) IS
'Pause a channel (created if unknown): it delivers nothing until channel_resume and keeps accepting messages. Returns false when it was already paused.';

REVOKE ALL ON FUNCTION @extschema@.channel_pause(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.channel_resume(p_channel text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.name = p_channel
    FOR UPDATE;
    IF NOT FOUND OR NOT v_channel.is_paused THEN
        RETURN FALSE;
    END IF;
    v_now := @extschema@._clock_ms();
    UPDATE @extschema@.channel AS c
    SET
        is_paused = FALSE,
        next_at = GREATEST(v_now, COALESCE(c.last_served_at + c.release_interval_ms, v_now)),
        turn = pg_catalog.nextval('@extschema@.channel_turn_seq'),
        wait_at = NULL
    WHERE c.id = v_channel.id;
    IF v_channel.notify THEN
        PERFORM pg_catalog.pg_notify('lonnymq', p_channel);
    END IF;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_resume(text) IS
'Resume a paused channel: it rejoins the rotation at the back. Returns false when it does not exist or is not paused.';

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
AS $$
DECLARE
    v_now bigint;
    v_dequeue_at bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_id bigint;
    v_existing bigint;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
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
    v_channel := @extschema@._channel_for_producer(p_channel, v_now);
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

    PERFORM @extschema@._channel_wake(
        v_channel.id, v_channel.wait_at, GREATEST(v_dequeue_at, v_now)
    );
    IF v_channel.notify AND v_dequeue_at <= v_now AND NOT v_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', p_channel);
    END IF;
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_create(text, bytea, bigint, text) IS
'Create a message in a channel (created with no limits if unknown). p_dequeue_at: epoch ms before which it is not delivered; past or negative values give priority within the channel. p_key: a deduplication key (the existing message''s id is returned while the key is held). Returns the id, or NULL when the channel is at max_size (nothing stored).';

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

COMMENT ON FUNCTION @extschema@.message_create_batch(text, bytea[], bigint[], text[]) IS
'Create many messages in one channel: one id per input in input order (the existing id for a duplicate key, NULL for one dropped at max_size). Array lengths must match (22023).';

REVOKE ALL ON FUNCTION @extschema@.message_create_batch(text, bytea[], bigint[], text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.message_cancel(p_id bigint)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
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

COMMENT ON FUNCTION @extschema@.message_cancel(bigint) IS
'Delete a message that is not locked (waiting, scheduled, deferred). Returns false when it does not exist or is locked by a worker.';

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
    PERFORM @extschema@._check_lock_ms(p_lock_ms);
    IF p_channel IS NOT NULL THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    IF v_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'lonnymq: p_limit must be between 1 and 1000, got %', v_limit
            USING ERRCODE = '22023';
    END IF;
    v_now := @extschema@._clock_ms();

    -- 0. Due periodic messages.
    PERFORM 1
    FROM @extschema@.schedule AS s
    WHERE s.next_at <= v_now
    ORDER BY s.next_at
    LIMIT 1;
    IF FOUND THEN
        PERFORM 1 FROM @extschema@._schedule_run(v_now, 4);
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
            -- waking up right now (their wake-up is due but locked).
            SELECT pg_catalog.array_agg(b.id ORDER BY b.next_at, b.turn) INTO v_busy
            FROM (
                SELECT c.id, c.next_at, c.turn
                FROM @extschema@.channel AS c
                WHERE c.next_at <= v_now + 1000
                ORDER BY c.next_at, c.turn
                LIMIT 8
            ) AS b;
            v_busy := COALESCE(v_busy, '{}') || ARRAY(
                SELECT w.channel_id
                FROM @extschema@.channel_wake AS w
                WHERE w.wake_at <= v_now
                ORDER BY w.wake_at, w.id
                LIMIT 8
            );
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
AS $$
DECLARE
    v_channel_id bigint;
    v_channel record;
    v_gone record;
    v_key text;
    v_now bigint;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    SELECT m.channel_id INTO v_channel_id
    FROM @extschema@.message AS m
    WHERE m.id = p_id;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    -- Lock order, as everywhere: the channel row before the message row.
    -- Only a channel with limits needs its row at all.
    SELECT
        c.name,
        c.max_concurrency IS NOT NULL OR c.max_size IS NOT NULL AS is_constrained,
        c.retain_history,
        c.dedup_window_ms
    INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id;
    IF v_channel.is_constrained THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel_id
        FOR NO KEY UPDATE;
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
    IF v_key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(
            v_channel_id, v_key, p_id, v_channel.dedup_window_ms, v_now
        );
    END IF;
    PERFORM @extschema@._channel_release(v_channel_id, 1, TRUE, v_now);
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_complete(bigint, integer) IS
'Complete a locked message: deletes it (keeping a copy in message_history when the channel retains history). Returns false (nothing changed) when p_num_attempts is not the current fencing token or the message is not locked.';

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

COMMENT ON FUNCTION @extschema@.message_complete_batch(bigint[], integer[]) IS
'Complete many locked messages: p_ids[k] with fencing token p_num_attempts[k]. Returns how many were completed (stale tokens and unlocked messages are skipped). Array lengths must match (22023).';

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
        attempt_log = COALESCE(m.attempt_log, '[]'::jsonb) || pg_catalog.jsonb_build_array(
            pg_catalog.jsonb_build_object('attempt', m.num_attempts, 'at', v_now, 'error', p_error)
        )
    WHERE m.id = p_id;
    PERFORM @extschema@._channel_release(v_channel_id, 1, FALSE, v_now);
    PERFORM @extschema@._channel_wake(v_channel_id, v_channel.wait_at, v_dequeue_at);
    IF v_channel.notify AND v_dequeue_at <= v_now AND NOT v_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', v_channel.name);
    END IF;
    RETURN 'retry';
END;
$$;

COMMENT ON FUNCTION @extschema@.message_fail(bigint, integer, text) IS
'Report a failed attempt of a locked message: ''retry'' (scheduled again after the channel''s backoff) or ''dead'' (moved to dead_letter once it has had max_attempts deliveries). Returns NULL (nothing changed) for a stale token or a message that is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_fail(bigint, integer, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.dead_letter_redrive(
    p_channel text DEFAULT NULL,
    p_ids bigint[] DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_dead record;
    v_channel @extschema@.channel%ROWTYPE;
    v_id bigint;
    v_key text;
    v_count integer := 0;
    v_in_channel integer := 0;
    v_cursor refcursor;
BEGIN
    IF p_channel IS NOT NULL THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    v_now := @extschema@._clock_ms();
    -- One query per way of choosing, each walking its own index in order:
    -- the ids (primary key), one channel or all (dead_letter_channel_ix).
    IF p_ids IS NOT NULL THEN
        OPEN v_cursor FOR
        SELECT d.*
        FROM @extschema@.dead_letter AS d
        WHERE d.id = ANY(p_ids) AND (p_channel IS NULL OR d.channel = p_channel)
        ORDER BY d.id
        FOR UPDATE SKIP LOCKED;
    ELSIF p_channel IS NOT NULL THEN
        OPEN v_cursor FOR
        SELECT d.*
        FROM @extschema@.dead_letter AS d
        WHERE d.channel = p_channel
        ORDER BY d.channel, d.id
        FOR UPDATE SKIP LOCKED;
    ELSE
        OPEN v_cursor FOR
        SELECT d.*
        FROM @extschema@.dead_letter AS d
        ORDER BY d.channel, d.id
        FOR UPDATE SKIP LOCKED;
    END IF;
    LOOP
        FETCH v_cursor INTO v_dead;
        EXIT WHEN NOT FOUND;
        IF v_channel.name IS DISTINCT FROM v_dead.channel THEN
            IF v_in_channel > 0 THEN
                PERFORM @extschema@._dead_letter_requeued(v_channel, v_in_channel, v_now);
            END IF;
            v_channel := @extschema@._channel_for_producer(v_dead.channel, v_now);
            v_in_channel := 0;
        END IF;
        v_id := pg_catalog.nextval('@extschema@.message_id_seq');
        v_key := v_dead.key;
        IF v_key IS NOT NULL THEN
            UPDATE @extschema@.message_key AS k
            SET message_id = v_id, expires_at = NULL
            WHERE
                k.channel_id = v_channel.id
                AND k.key = v_key
                AND (k.message_id = v_dead.id OR k.expires_at <= v_now);
            IF NOT FOUND THEN
                INSERT INTO @extschema@.message_key (channel_id, key, message_id)
                VALUES (v_channel.id, v_key, v_id)
                ON CONFLICT (channel_id, key) DO NOTHING;
                IF NOT FOUND THEN
                    v_key := NULL;
                END IF;
            END IF;
        END IF;
        INSERT INTO @extschema@.message (
            id, channel_id, dequeue_at, created_at, content, state, key, attempt_log
        )
        VALUES (
            v_id, v_channel.id, v_now, v_dead.created_at, v_dead.content, v_dead.state, v_key,
            v_dead.attempt_log
        );
        DELETE FROM @extschema@.dead_letter AS d WHERE d.id = v_dead.id;
        v_count := v_count + 1;
        v_in_channel := v_in_channel + 1;
    END LOOP;
    CLOSE v_cursor;
    IF v_in_channel > 0 THEN
        PERFORM @extschema@._dead_letter_requeued(v_channel, v_in_channel, v_now);
    END IF;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION @extschema@.dead_letter_redrive(text, bigint[]) IS
'Put dead letters back as new messages deliverable now: those of p_channel and/or with an id in p_ids (all when both are NULL). Returns how many.';

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
    -- A variable, not the expression: the plan then sees the cutoff and
    -- walks message_history_completed_ix when little is old enough.
    v_cutoff := @extschema@._clock_ms() - p_older_than_ms;
    DELETE FROM @extschema@.message_history AS h
    WHERE h.completed_at <= v_cutoff;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION @extschema@.history_prune(bigint) IS
'Delete message_history rows completed at least p_older_than_ms ago (0: all). Returns how many were deleted.';

REVOKE ALL ON FUNCTION @extschema@.history_prune(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.dead_letter_delete(
    p_channel text DEFAULT NULL,
    p_ids bigint[] DEFAULT NULL,
    p_all boolean DEFAULT FALSE
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    IF p_channel IS NOT NULL THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    IF p_channel IS NULL AND p_ids IS NULL AND NOT COALESCE(p_all, FALSE) THEN
        RAISE EXCEPTION 'lonnymq: give p_channel or p_ids, or p_all => true to delete every dead letter'
            USING ERRCODE = '22004';
    END IF;
    IF p_ids IS NOT NULL THEN
        DELETE FROM @extschema@.dead_letter AS d
        WHERE d.id = ANY(p_ids) AND d.id IN (
            SELECT x.id
            FROM @extschema@.dead_letter AS x
            WHERE x.id = ANY(p_ids) AND (p_channel IS NULL OR x.channel = p_channel)
            FOR UPDATE SKIP LOCKED
        );
    ELSIF p_channel IS NOT NULL THEN
        DELETE FROM @extschema@.dead_letter AS d
        WHERE d.channel = p_channel AND d.id IN (
            SELECT x.id
            FROM @extschema@.dead_letter AS x
            WHERE x.channel = p_channel
            FOR UPDATE SKIP LOCKED
        );
    ELSE
        DELETE FROM @extschema@.dead_letter AS d
        WHERE d.id IN (
            SELECT x.id
            FROM @extschema@.dead_letter AS x
            FOR UPDATE SKIP LOCKED
        );
    END IF;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION @extschema@.dead_letter_delete(text, bigint[], boolean) IS
'Delete dead letters for good: those of p_channel and/or with an id in p_ids, or all of them with p_all => true. Returns how many.';

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
    IF pg_catalog.octet_length(p_content) > 16777216 THEN
        RAISE EXCEPTION 'lonnymq: p_content is % bytes, the limit is 16777216 (16 MiB)',
            pg_catalog.octet_length(p_content)
            USING ERRCODE = '54000';
    END IF;
    IF p_every_ms NOT BETWEEN 1 AND 31536000000 THEN
        RAISE EXCEPTION 'lonnymq: p_every_ms must be between 1 and 31536000000 (365 days), got %',
            p_every_ms
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

COMMENT ON FUNCTION @extschema@.schedule_set(text, text, bytea, bigint, bigint) IS
'Create or replace a periodic message: p_content into p_channel every p_every_ms from p_start_at (NULL: now). Missed periods are coalesced into one message.';

REVOKE ALL ON FUNCTION @extschema@.schedule_set(text, text, bytea, bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.schedule_drop(p_name text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_name IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_name must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    DELETE FROM @extschema@.schedule AS s WHERE s.name = p_name;
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION @extschema@.schedule_drop(text) IS
'Drop a periodic message (messages already created stay). Returns false when there is no such schedule.';

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
    SELECT r.created INTO v_created
    FROM @extschema@._schedule_run(v_now, 10000) AS r;
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

COMMENT ON FUNCTION @extschema@.tick() IS
'Housekeeping for pg_cron (optional): create due periodic messages and delete expired deduplication claims. Returns how many periodic messages were created.';

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
