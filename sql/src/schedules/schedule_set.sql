-- Create or replace a periodic message: every p_every_ms, starting at
-- p_start_at (NULL: now), a message with p_content is created in p_channel.
-- The schedule's next boundary is its pending occurrence, a scheduled
-- message (message.schedule = p_name) that a dequeue's or tick()'s
-- promotion makes the boundary's message (_schedule_next: the catch-up
-- rule).  Replacing a schedule keeps its position when the period is
-- unchanged and p_start_at is NULL or unchanged; otherwise it restarts from
-- p_start_at (or now); its occurrence is rewritten in place.  The epoch is
-- entered before the clock is read: the occurrence's key in message_due_ix,
-- greatest(next_at, this clock), is above the due mark.  One row
-- per name without a unique index (see the schedule table): one schedule_set
-- at a time, and at REPEATABLE READ or SERIALIZABLE, a name not found by an
-- UPDATE is inserted only when the last schedule_set that inserted a row
-- (schedule_changer_seq) had ended before the snapshot, which so cannot miss
-- its row; else 40001.
-- Parameters: p_name (1 to 255 characters); p_channel (a channel's name, not a
--   pattern); p_content (at most _max_content_bytes); p_every_ms (1 to
--   _max_duration_ms); p_start_at (years 1 to 9999, NULL: now).
-- Returns: nothing.  Errors (doc/schedule_set.md): 22004, 22023, 54000; 40001
--   at REPEATABLE READ or SERIALIZABLE (above).
-- Calls: _check_message_channel, _check_size, _max_content_bytes,
--   _max_duration_ms, _epoch_enter, _clock_ms, _xact_seen, _channel_id.
-- Tables: reads schedule_changer_seq (the last inserter); writes schedule (the
--   named row updated, by schedule_name_ix, else a row inserted), message
--   (its occurrence updated, by message_pkey, else inserted),
--   schedule_changer_seq (setval: this transaction, when it inserted).
-- Locks: advisory (1819111684, 0) exclusive, one schedule_set at a time, until
--   the transaction ends, before anything else; the epoch's parity
--   (1819111690) shared until the transaction ends (_epoch_enter); the
--   schedule's row, by the update (which waits for a dequeue or tick()
--   promoting its occurrence), then its occurrence's row, by the update
--   (which waits for a promotion that found the schedule's row busy).
CREATE FUNCTION @extschema@.schedule_set(
    p_name text,
    p_channel text,
    p_content bytea,
    p_every_ms bigint,
    p_start_at bigint DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_start bigint;
    v_next_at bigint;
    v_occurrence bigint;
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
    PERFORM @extschema@._check_message_channel(p_channel);
    IF p_content IS NULL OR p_every_ms IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_content and p_every_ms must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    PERFORM @extschema@._check_size('p_content', pg_catalog.octet_length(p_content), @extschema@._max_content_bytes());
    IF p_every_ms NOT BETWEEN 1 AND @extschema@._max_duration_ms() THEN
        RAISE EXCEPTION 'lonnymq: p_every_ms must be between 1 and % (365 days), got %',
            @extschema@._max_duration_ms(), p_every_ms
            USING ERRCODE = '22023';
    END IF;
    -- Years 1 to 9999: every period boundary of such a schedule, and its
    -- distance from any clock reading, fits a bigint.
    IF p_start_at NOT BETWEEN -62135596800000 AND 253402300799999 THEN
        RAISE EXCEPTION 'lonnymq: p_start_at must be between -62135596800000 and 253402300799999 (years 1 to 9999), got %',
            p_start_at
            USING ERRCODE = '22023';
    END IF;
    -- One schedule_set at a time, until this transaction ends: one row per
    -- name without a unique index (see the schedule table).
    PERFORM pg_catalog.pg_advisory_xact_lock(1819111684, 0);
    -- In the epoch before the clock: the occurrence's created_at, this
    -- clock, is above the due mark.
    PERFORM @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    v_start := COALESCE(p_start_at, v_now);
    UPDATE @extschema@.schedule AS s
    SET
        channel = p_channel,
        content = p_content,
        every_ms = p_every_ms,
        start_at = CASE
            WHEN s.every_ms = p_every_ms AND (p_start_at IS NULL OR s.start_at = p_start_at) THEN s.start_at
            ELSE v_start
        END,
        next_at = CASE
            WHEN s.every_ms = p_every_ms AND (p_start_at IS NULL OR s.start_at = p_start_at) THEN s.next_at
            ELSE v_start
        END,
        set_at = v_now
    WHERE s.name = p_name
    RETURNING s.next_at, s.occurrence_id INTO v_next_at, v_occurrence;
    IF FOUND THEN
        -- Its pending occurrence follows (the update of the schedule waited
        -- for a promotion of it, and read the occurrence that one created).
        UPDATE @extschema@.message AS m
        SET
            channel_id = @extschema@._channel_id(p_channel), channel = p_channel, content = p_content,
            dequeue_at = v_next_at, created_at = v_now
        WHERE m.id = v_occurrence AND m.schedule = p_name;
        IF FOUND THEN
            RETURN;
        END IF;
    -- A transaction snapshot may miss a row inserted since it was taken:
    -- only when the last inserter had ended before it.
    ELSIF pg_catalog.current_setting('transaction_isolation') <> 'read committed'
        AND NOT @extschema@._xact_seen(pg_catalog.pg_sequence_last_value('@extschema@.schedule_changer_seq')) THEN
        RAISE EXCEPTION 'lonnymq: could not serialize access due to a concurrent schedule_set'
            USING ERRCODE = '40001', HINT = 'Retry the transaction.';
    END IF;
    -- The occurrence of a new schedule, or of one whose occurrence was
    -- deleted by hand (the schedule goes on).
    INSERT INTO @extschema@.message (channel_id, channel, dequeue_at, created_at, content, schedule)
    VALUES (@extschema@._channel_id(p_channel), p_channel, COALESCE(v_next_at, v_start), v_now, p_content, p_name)
    RETURNING id INTO v_occurrence;
    IF v_next_at IS NOT NULL THEN
        UPDATE @extschema@.schedule AS s SET occurrence_id = v_occurrence WHERE s.name = p_name;
        RETURN;
    END IF;
    INSERT INTO @extschema@.schedule (name, channel, content, every_ms, start_at, next_at, created_at, set_at, occurrence_id)
    VALUES (p_name, p_channel, p_content, p_every_ms, v_start, v_start, v_now, v_now, v_occurrence);
    PERFORM pg_catalog.setval('@extschema@.schedule_changer_seq', pg_catalog.pg_current_xact_id()::text::bigint);
END;
$$;

COMMENT ON FUNCTION @extschema@.schedule_set(text, text, bytea, bigint, bigint) IS
'Create or replace a periodic message: p_content into p_channel every p_every_ms from p_start_at (NULL: now). Missed periods are coalesced into one message.';

REVOKE ALL ON FUNCTION @extschema@.schedule_set(text, text, bytea, bigint, bigint) FROM PUBLIC;
