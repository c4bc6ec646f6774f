-- Create a channel or set its configuration, recounting exactly what the
-- new limits need.  Declarative: the call states the whole configuration,
-- and an omitted parameter takes its default (a paused channel stays
-- paused: see channel_pause).  Lock order, as everywhere: channel row, then message rows.
-- FOR UPDATE on the channel row waits for every consumer serving it (FOR NO
-- KEY UPDATE) and every complete or defer updating its counters; the channel
-- guard, taken exclusively, waits for every producer and every consumer
-- taking from it as a busy channel (both hold it shared); FOR SHARE on the
-- channel's locked messages waits for completes, defers and heartbeats in
-- flight.  Only then are the counts taken, each
-- with a fresh snapshot, so no in-flight change is missed or counted twice.
-- (Without limits before or after, nothing is counted and nothing waited
-- for.)  Giving a channel max_concurrency marks its locks counted
-- (message.is_counted), which walks the channel's messages once; every
-- other call finds its locks through message_locked_ix.
CREATE FUNCTION @extschema@.channel_set(
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
    p_notify boolean DEFAULT FALSE,
    p_notify_payload text DEFAULT 'name'
)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
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
    IF v_interval NOT BETWEEN 0 AND @extschema@._max_duration_ms() THEN
        RAISE EXCEPTION 'lonnymq: p_release_interval_ms must be between 0 and % (365 days), got %',
            @extschema@._max_duration_ms(), v_interval
            USING ERRCODE = '22023';
    END IF;

    IF p_max_attempts < 1 THEN
        RAISE EXCEPTION 'lonnymq: p_max_attempts must be NULL (unlimited) or at least 1, got %',
            p_max_attempts
            USING ERRCODE = '22023';
    END IF;
    IF v_base NOT BETWEEN 0 AND @extschema@._max_duration_ms() OR v_max NOT BETWEEN 0 AND @extschema@._max_duration_ms() THEN
        RAISE EXCEPTION 'lonnymq: p_backoff_base_ms and p_backoff_max_ms must be between 0 and %, got % and %',
            @extschema@._max_duration_ms(), v_base, v_max
            USING ERRCODE = '22023';
    END IF;
    IF NOT v_factor BETWEEN 1.0 AND 1000.0 THEN
        RAISE EXCEPTION 'lonnymq: p_backoff_factor must be between 1 and 1000, got %', v_factor
            USING ERRCODE = '22023';
    END IF;
    IF p_notify_payload NOT IN ('name', 'id', 'none') THEN
        RAISE EXCEPTION 'lonnymq: p_notify_payload must be name, id or none, got "%"', p_notify_payload
            USING ERRCODE = '22023';
    END IF;
    IF NOT v_jitter BETWEEN 0.0 AND 1.0 THEN
        RAISE EXCEPTION 'lonnymq: p_backoff_jitter must be between 0 and 1, got %', v_jitter
            USING ERRCODE = '22023';
    END IF;
    IF v_window NOT BETWEEN 0 AND @extschema@._max_duration_ms() THEN
        RAISE EXCEPTION 'lonnymq: p_dedup_window_ms must be between 0 and % (365 days), got %',
            @extschema@._max_duration_ms(), v_window
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
        notify_payload = CASE p_notify_payload WHEN 'id' THEN c.id::text WHEN 'none' THEN '' END,
        num_locked = v_locked,
        next_at = v_next,
        turn = @extschema@._channel_turn(c.next_at, v_next, c.turn)
    WHERE c.id = v_channel.id;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean, text
) IS
'Create a channel or set its whole configuration: max_concurrency (messages locked at once), max_size (messages held), release_interval_ms (minimum gap between deliveries), the retry policy (max_attempts, backoff), dedup_window_ms, retain_history, notify and its payload (name, id or none). NULL limits mean unlimited; omitted parameters take their defaults.';

REVOKE ALL ON FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean, text
) FROM PUBLIC;
