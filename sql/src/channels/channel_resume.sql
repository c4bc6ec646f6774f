-- Resume a paused channel: its held messages are admitted again
-- (_channel_readmit): a channel with limits admits them while it has room,
-- one without takes them into the round order at its next turns.  Returns
-- false when the channel does not exist or is not paused.  With notify on,
-- a notification is sent.
-- Parameters: p_channel, the channel's name.
-- Returns: TRUE when resumed now; FALSE when it has no row or is not
--   paused.
-- Calls: _check_channel_name, _epoch_enter, _clock_ms,
--   _channel_guard_exclusive, _channel_row_lock, _channel_id,
--   _channel_readmit.
-- Tables: reads channel (channel_pkey); writes channel (is_paused).
-- Locks: the epoch's parity (1819111690) shared until the transaction ends
--   (_epoch_enter); advisory (1819111681, hashtext(name)) then (1819111682,
--   hashtext(name) & 31) exclusive until the transaction ends
--   (_channel_guard_exclusive); advisory (1819111683, hashint8(id))
--   exclusive until the transaction ends (_channel_row_lock); the channel's
--   row FOR UPDATE, then updated; the messages _channel_readmit updates.
CREATE FUNCTION @extschema@.channel_resume(p_channel text)
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
    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    PERFORM @extschema@._channel_guard_exclusive(p_channel);
    PERFORM @extschema@._channel_row_lock(@extschema@._channel_id(p_channel));
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = @extschema@._channel_id(p_channel) AND c.name = p_channel
    FOR UPDATE;
    IF NOT FOUND OR NOT v_channel.is_paused THEN
        RETURN FALSE;
    END IF;
    UPDATE @extschema@.channel AS c
    SET is_paused = FALSE
    WHERE c.id = v_channel.id
    RETURNING c.* INTO v_channel;
    PERFORM @extschema@._channel_readmit(v_channel, v_bound, v_now);
    IF v_channel.notify THEN
        PERFORM pg_catalog.pg_notify('lonnymq', COALESCE(v_channel.notify_payload, p_channel));
    END IF;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_resume(text) IS
'Resume a paused channel: its messages are delivered again, in the round order. Returns false when it does not exist or is not paused.';

REVOKE ALL ON FUNCTION @extschema@.channel_resume(text) FROM PUBLIC;
