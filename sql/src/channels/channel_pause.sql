-- Pause a channel: from the commit on it delivers nothing (not even expired
-- locks) and keeps accepting messages; locked messages can still be
-- completed, deferred, failed and heartbeated.  Its ready messages are held
-- (_channel_readmit: a cost in proportion to the channel's messages, once),
-- and what comes to it meanwhile is held too.  Like channel_set, it takes
-- the channel guard exclusively (waiting for producers in flight) and then
-- the channel's row.  An unknown channel gets a row, paused (a copy of its
-- pattern's configuration when it follows one, and it goes on following
-- it).  Returns false when the channel was already paused.  A pattern
-- cannot be paused (0A000).
-- Parameters: p_channel, the channel's name.
-- Returns: TRUE when paused now; FALSE when it was already paused.
-- Calls: _check_channel_name, _epoch_enter, _clock_ms,
--   _channel_guard_exclusive, _channel_lock, _channel_readmit.
-- Tables: reads channel_followed_seq (its last value); writes channel
--   (is_paused; _channel_lock reads it, and inserts it for an unknown
--   channel), channel_followed_seq (setval, once).
-- Locks: the epoch's parity (1819111690) shared until the transaction ends
--   (_epoch_enter); advisory (1819111681, hashtext(name)) then (1819111682,
--   hashtext(name) & 31) exclusive until the transaction ends
--   (_channel_guard_exclusive); advisory (1819111683, hashint8(id))
--   exclusive and the channel's row FOR UPDATE until the transaction ends
--   (_channel_lock), then updated; the messages _channel_readmit updates.
CREATE FUNCTION @extschema@.channel_pause(p_channel text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bound bigint;
    v_now bigint;
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    IF pg_catalog.right(p_channel, 1) = '*' THEN
        RAISE EXCEPTION 'lonnymq: a pattern (a name ending in *) cannot be paused: pause its channels'
            USING ERRCODE = '0A000';
    END IF;
    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    PERFORM @extschema@._channel_guard_exclusive(p_channel);
    v_channel := @extschema@._channel_lock(p_channel, v_now);
    IF v_channel.is_paused THEN
        RETURN FALSE;
    END IF;
    -- A pause is admission, which completions follow (channel_followed_seq),
    -- from before the pause's writes can be seen.
    IF pg_catalog.pg_sequence_last_value('@extschema@.channel_followed_seq') = 0 THEN
        PERFORM pg_catalog.setval('@extschema@.channel_followed_seq', 1);
    END IF;
    UPDATE @extschema@.channel AS c
    SET is_paused = TRUE
    WHERE c.id = v_channel.id
    RETURNING c.* INTO v_channel;
    PERFORM @extschema@._channel_readmit(v_channel, v_bound, v_now);
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_pause(text) IS
'Pause a channel (created if unknown): it delivers nothing until channel_resume and keeps accepting messages. Returns false when it was already paused.';

REVOKE ALL ON FUNCTION @extschema@.channel_pause(text) FROM PUBLIC;
