-- Cancel (delete) a message that is not locked: waiting for admission or
-- for its parents, scheduled or deferred.  The messages that wait for it
-- are cancelled too, and theirs in turn, unless they were created with
-- p_after_mode 'ended' (then it counts as ended for them): through its
-- release row, resolved by the following dequeues (_message_release).
-- Returns false, changing nothing, when it does not exist or a worker holds
-- it (a locked message is the worker's to complete or fail, even once its
-- lock has expired), or when it is a schedule's pending occurrence (not a
-- message yet: schedule_drop drops it).  Its deduplication key is released
-- at once (a cancelled message was never processed).  A max_size channel
-- counts it removed (_channel_removed); an admitted message frees its
-- place, and the release interval's pending delivery it held, and the
-- channel admits its next (_channel_admit).  Lock order, as everywhere:
-- the channel guard and, for a channel with limits or max_size, the
-- channel row lock (_message_channel), then the message row; a consumer
-- taking the message concurrently wins, and cancel then returns false.
-- Parameters: p_id, the message's id.
-- Returns: true when the message was deleted; false when it does not
--   exist, is locked, or is a schedule's occurrence.
-- Calls: _message_channel, _message_key_release, _channel_removed,
--   _channel_admit, _clock_ms, _message_release (a message with
--   dependents).
-- Tables: writes message (delete, by message_pkey; a release row) (the message's
--   channel_id read by _message_channel; message_key by
--   _message_key_release; channel by _channel_removed and _channel_admit).
-- Locks: the message row, deleted (waits for a take in flight, then finds
--   it locked).  Its callees': the channel guard (1819111681) shared and,
--   for a channel with limits or max_size, the channel row lock
--   (1819111683) exclusive, both until the transaction ends
--   (_message_channel); the channel row FOR NO KEY UPDATE (_channel_admit).
CREATE FUNCTION @extschema@.message_cancel(p_id bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
    v_gone record;
BEGIN
    IF p_id IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_id must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    v_channel := @extschema@._message_channel(p_id);
    IF v_channel.id IS NULL THEN
        RETURN FALSE;
    END IF;
    DELETE FROM @extschema@.message AS m
    WHERE m.id = p_id AND NOT m.is_locked AND m.schedule IS NULL
    RETURNING
        m.key, m.is_admitted, m.is_limited AND m.position IS NOT NULL AS was_unclaimed, m.has_dependents, m.channel
    INTO v_gone;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    IF v_gone.key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(v_channel.id, v_gone.key, p_id, 0, 0);
    END IF;
    PERFORM @extschema@._channel_removed(ARRAY[v_channel.id]);
    IF v_gone.is_admitted THEN
        -- Admitted and not delivered: it also held the release interval's turn.
        PERFORM @extschema@._channel_admit(v_channel.id, 1, 1, @extschema@._clock_ms(), NULL);
    ELSIF v_gone.was_unclaimed THEN
        -- Placed in a channel whose takes claim: its place in the channel's
        -- room goes to a held message (_channel_admit).
        PERFORM @extschema@._channel_admit(v_channel.id, 0, 0, @extschema@._clock_ms(), NULL);
    END IF;
    -- Its dependents are cancelled too, unless they wait for any end
    -- (through its release row).
    IF v_gone.has_dependents THEN
        PERFORM @extschema@._message_release(ARRAY[p_id], ARRAY[v_channel.id], ARRAY[v_gone.channel], 'cancelled');
    END IF;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_cancel(bigint) IS
'Delete a message that is not locked (waiting, scheduled, deferred). Returns false when it does not exist or is locked by a worker.';

REVOKE ALL ON FUNCTION @extschema@.message_cancel(bigint) FROM PUBLIC;
