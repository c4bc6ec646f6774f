-- Internal: lock up to p_limit deliverable messages of one channel in
-- (dequeue_at, id) order, skipping rows other transactions hold, with one
-- index range scan.  p_expired_only: only expired locks (for a channel at its
-- max_concurrency), found through message_locked_ix so that a ready backlog
-- is never walked.  p_counted: the channel has max_concurrency, so the new
-- locks are counted (message.is_counted).  Returns each message as it was
-- before the lock, with was_locked = an expired lock recovered.
--
-- An expired lock is a failed attempt: it is logged ("lock expired") and,
-- when the message has had p_max_attempts deliveries already, the message
-- goes to the dead letters instead of being delivered again (returned with
-- is_dead, for the caller's counters) -- unless p_bury is false, when it is
-- left alone for a caller that can update the channel's counters.  Dead
-- ones do not count towards p_limit: the scan goes on for replacements, at
-- most p_limit + 16 buried per call.  A channel at max_concurrency
-- (p_expired_only) gets as many replacements, of any kind, as locks it
-- buried: each freed a place.
--
-- Row by row (a cursor, and an UPDATE by primary key per row) rather than
-- one statement locking the share and one UPDATE ... WHERE id = ANY: that
-- set-based form was measured 35% slower for the common single-message
-- dequeue (8 clients, one channel) and no faster for batches of 100 (the
-- batch gain came from message_dequeue collecting each share at once).
CREATE FUNCTION @extschema@._message_take(
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
