-- Create a channel or set its configuration.  Declarative: the call states
-- the whole configuration, and an omitted parameter takes its default (a
-- paused channel stays paused: see channel_pause).  Lock order: the channel
-- guard, taken exclusively (it waits for the calls in flight that decided a
-- message's state under the old configuration: producers, fails, defers,
-- promotions), then the channel row (created with its pattern's
-- configuration or the defaults when the channel had none: _channel_lock),
-- then the channel's locked messages FOR SHARE (waits for completes and
-- fails in flight), so that the counts are taken after every change in
-- flight.  With max_size the channel's messages are counted again into
-- channel_quota (without it, its quota row goes); new limits
-- (max_concurrency, release_interval_ms, ordered) admit the channel's
-- messages again (_channel_readmit), which reads the channel's messages
-- once.  Other changes write the row only.
-- A name ending in '*' is a pattern: it configures every channel whose
-- name starts with what precedes the '*' and that has no configuration of
-- its own, the longest prefix winning (_channel_pattern_config); its
-- followers take the change at once (_channel_pattern_apply), and
-- channel_pattern_seq tells producers and completions from then on to look
-- for patterns.  History, max_size or a limit set channel_followed_seq:
-- completions look for channel rows from then on.  A pattern takes no
-- max_size (0A000).
-- Parameters: p_channel, the channel's or pattern's name; p_max_concurrency,
--   messages locked at once (NULL: no limit; 1 when p_ordered); p_max_size,
--   messages held (NULL: no limit); p_release_interval_ms, the least time
--   between two deliveries (0: none); p_max_attempts, failed deliveries
--   before the dead letters (NULL: no limit); p_backoff_base_ms,
--   p_backoff_factor, p_backoff_max_ms, p_backoff_jitter, the retry delay
--   (_backoff_ms); p_dedup_window_ms, how long a key stays claimed after
--   its message ends; p_retain_history, whether completions are copied to
--   message_history; p_notify, whether deliverable messages send NOTIFY
--   lonnymq; p_notify_payload, name, id or none; p_ordered, one message at
--   a time, a failed or deferred one keeping its place.  NULL takes the
--   default for the settings that have one.
-- Returns: nothing.
-- Calls: _check_channel_name, _max_duration_ms, _epoch_enter, _clock_ms,
--   _channel_guard_exclusive, _channel_admits, _channel_pattern_config,
--   _channel_defaults, _channel_lock, _channel_pattern_apply,
--   _channel_readmit.
-- Tables: reads message (message_channel_ix: its locked messages, and its
--   count with max_size), channel_followed_seq (its last value); writes
--   channel (update; insert by _channel_lock), channel_quota (upsert or
--   delete), channel_pattern_seq (setval, for a pattern),
--   channel_followed_seq (setval, once: history, max_size or a limit).
-- Locks: the epoch's parity (1819111690) shared until the transaction ends
--   (_epoch_enter); advisory (1819111681, hashtext(name)) then (1819111682,
--   hashtext(name) & 31) exclusive until the transaction ends
--   (_channel_guard_exclusive); advisory (1819111683, hashint8(id))
--   exclusive and the channel's row FOR UPDATE until the transaction ends
--   (_channel_lock); its locked messages FOR SHARE; the channel row and
--   its channel_quota row it writes; the messages _channel_readmit updates
--   and the followers _channel_pattern_apply changes.
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
    p_notify_payload text DEFAULT 'name',
    p_ordered boolean DEFAULT FALSE
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
    v_bound bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_new @extschema@.channel%ROWTYPE;
    v_held bigint;
    v_was_limited boolean;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    IF p_ordered AND p_max_concurrency <> 1 THEN
        RAISE EXCEPTION 'lonnymq: an ordered channel delivers one message at a time: p_max_concurrency must be NULL or 1, got %',
            p_max_concurrency
            USING ERRCODE = '22023';
    END IF;
    IF p_max_size IS NOT NULL AND pg_catalog.right(p_channel, 1) = '*' THEN
        RAISE EXCEPTION 'lonnymq: a pattern (a name ending in *) cannot set p_max_size: set it on each channel'
            USING ERRCODE = '0A000';
    END IF;
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

    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    -- The guard first, then the row: producers hold the guard when they
    -- lock the row (admission).
    PERFORM @extschema@._channel_guard_exclusive(p_channel);
    -- (A pattern: whether what applied to its prefix before had limits.)
    IF pg_catalog.right(p_channel, 1) = '*' THEN
        v_was_limited := @extschema@._channel_admits(COALESCE(
            (SELECT f FROM @extschema@._channel_pattern_config(pg_catalog.left(p_channel, -1)) AS f),
            @extschema@._channel_defaults(p_channel, 0)
        ));
    END IF;
    v_channel := @extschema@._channel_lock(p_channel, v_now);
    -- Something completions must follow, from now on (channel_followed_seq):
    -- set before the completions in flight are waited for below, so that
    -- one that comes after sees it.
    IF (p_retain_history OR p_max_size IS NOT NULL OR p_max_concurrency IS NOT NULL OR v_interval > 0 OR p_ordered)
        AND pg_catalog.pg_sequence_last_value('@extschema@.channel_followed_seq') = 0 THEN
        PERFORM pg_catalog.setval('@extschema@.channel_followed_seq', 1);
    END IF;

    -- Wait for the calls in flight that remove or settle the channel's
    -- messages (completes, fails: they lock a message row, not the guard),
    -- so that the counts below are their outcome.
    PERFORM 1
    FROM @extschema@.message AS m
    WHERE m.channel_id = v_channel.id AND m.channel = v_channel.name AND m.is_locked
    FOR SHARE;
    IF p_max_size IS NOT NULL THEN
        -- (A schedule's pending occurrence is counted at its boundary.)
        SELECT pg_catalog.count(*) INTO v_held
        FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel.id AND m.channel = v_channel.name AND m.schedule IS NULL;
        INSERT INTO @extschema@.channel_quota AS q (channel_id, num_created)
        VALUES (v_channel.id, v_channel.num_removed + v_held)
        ON CONFLICT (channel_id) DO UPDATE
            SET num_created = excluded.num_created;
    ELSE
        DELETE FROM @extschema@.channel_quota AS q
        WHERE q.channel_id = v_channel.id;
    END IF;

    UPDATE @extschema@.channel AS c
    SET
        -- (An ordered channel is one at a time.)
        max_concurrency = CASE WHEN p_ordered THEN 1 ELSE p_max_concurrency END,
        is_ordered = COALESCE(p_ordered, FALSE),
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
        -- (Its own configuration now, if it followed a pattern.)
        pattern = NULL,
        prefix = CASE WHEN pg_catalog.right(p_channel, 1) = '*' THEN pg_catalog.left(p_channel, -1) END
    WHERE c.id = v_channel.id
    RETURNING c.* INTO v_new;
    IF v_new.prefix IS NOT NULL THEN
        -- (From now on producers and completions look for patterns.)
        PERFORM pg_catalog.setval('@extschema@.channel_pattern_seq', 1);
        PERFORM @extschema@._channel_pattern_apply(v_new.prefix, v_was_limited, v_bound, v_now);
    -- New limits: the channel's messages are admitted again under them.
    ELSIF (v_new.max_concurrency, v_new.release_interval_ms, v_new.is_ordered) IS DISTINCT FROM
        (v_channel.max_concurrency, v_channel.release_interval_ms, v_channel.is_ordered) THEN
        PERFORM @extschema@._channel_readmit(v_new, v_bound, v_now);
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean, text, boolean
) IS
'Create a channel or set its whole configuration: max_concurrency (messages locked at once), max_size (messages held), release_interval_ms (minimum gap between deliveries), the retry policy (max_attempts, backoff), dedup_window_ms, retain_history, notify and its payload (name, id or none), and whether it is ordered (one message at a time, a failed or deferred one keeping its place). NULL limits mean unlimited; omitted parameters take their defaults.';

REVOKE ALL ON FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean, text, boolean
) FROM PUBLIC;
