-- Put dead letters back into their channels, deliverable now: those of
-- p_channel, or those with an id in p_ids, or both filters, or every dead
-- letter when both are NULL.  Returns how many were put back, each counted
-- in lonnymq_messages_created_total.  A redriven message keeps its id, so
-- that the messages that wait for it find it again (doc/dependencies.md),
-- and its count of attempts, which keeps fencing: a token from before its
-- death can never match a later delivery, since the count only grows; its
-- failures (max_attempts) start again at 0.  It keeps its content, state,
-- headers, key, created_at and attempt log (_message_redrive).  A message
-- that died waiting for its parents (dead_letter.after) waits for those
-- still in the queue again, after the others of this call, in id order, so
-- that a parent redriven by the same call is found back; while one of them
-- is still a dead letter it stays dead (not counted; its last error says
-- which).  Dead letters locked by a concurrent redrive or delete are
-- skipped.
-- Parameters: p_channel, only this channel's dead letters (NULL: any channel);
--   p_ids, only these ids (NULL: any).
-- Returns: how many were put back.
-- Calls: _check_channel_name, _epoch_enter, _clock_ms, _channel_guard_shared,
--   _channel_id, _channel_config, _message_redrive.
-- Tables: reads dead_letter (dead_letter_pkey for p_ids, else
--   dead_letter_channel_ix, in order; the waiting ones again by
--   dead_letter_pkey) (the rest through _message_redrive).
-- Locks: the epoch's parity (1819111690) shared until the transaction ends
--   (_epoch_enter); the dead letters FOR UPDATE SKIP LOCKED; per channel,
--   the channel guard (1819111681, or its bucket guard 1819111682) shared
--   until the transaction ends (_channel_guard_shared); _message_redrive's.
CREATE FUNCTION @extschema@.dead_letter_redrive(
    p_channel text DEFAULT NULL,
    p_ids bigint[] DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_dead @extschema@.dead_letter%ROWTYPE;
    v_channel @extschema@.channel%ROWTYPE;
    v_count integer := 0;
    v_bound bigint;
    v_cursor refcursor;
    v_waiting bigint[] := '{}';
BEGIN
    IF p_channel IS NOT NULL THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    v_bound := @extschema@._epoch_enter();
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
        -- A message that died waiting: after the others, in id order, so
        -- that a parent redriven by this call is back first.
        IF v_dead.after IS NOT NULL THEN
            v_waiting := v_waiting || v_dead.id;
            CONTINUE;
        END IF;
        IF v_channel.name IS DISTINCT FROM v_dead.channel THEN
            PERFORM @extschema@._channel_guard_shared(v_dead.channel);
            v_channel := @extschema@._channel_config(@extschema@._channel_id(v_dead.channel), v_dead.channel);
        END IF;
        IF @extschema@._message_redrive(v_dead, v_channel, v_bound, v_now) THEN
            v_count := v_count + 1;
        END IF;
    END LOOP;
    CLOSE v_cursor;
    FOR v_dead IN
        SELECT d.* FROM @extschema@.dead_letter AS d WHERE d.id = ANY(v_waiting) ORDER BY d.id
    LOOP
        PERFORM @extschema@._channel_guard_shared(v_dead.channel);
        v_channel := @extschema@._channel_config(@extschema@._channel_id(v_dead.channel), v_dead.channel);
        IF @extschema@._message_redrive(v_dead, v_channel, v_bound, v_now) THEN
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION @extschema@.dead_letter_redrive(text, bigint[]) IS
'Put dead letters back as new messages deliverable now: those of p_channel and/or with an id in p_ids (all when both are NULL). Returns how many.';

REVOKE ALL ON FUNCTION @extschema@.dead_letter_redrive(text, bigint[]) FROM PUBLIC;
