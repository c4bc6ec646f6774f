-- Internal: the configuration of message p_id's channel, for a call that
-- settles the message or returns it to its channel (fail, defer, cancel), with
-- the channel's row lock (_channel_row_lock) held when the channel admits
-- (limits, a pause) or has max_size (the counts that the call changes, which
-- completions lock the same way): channel rows before message rows, as
-- completions lock them (see _message_complete_set), so these calls do not
-- deadlock each other.  The configuration is read before the lock: the channel
-- guard, held, keeps it from changing, and the callers read no count
-- (_channel_admit reads them under the lock) but an ordered channel's
-- release_at, which only a delivery of its one admitted message, the caller's,
-- writes.  One probe of message_pkey, and _channel_config's of channel_pkey
-- (and channel_prefix_key for a channel without a row).
-- Parameters: p_id, the message's id.
-- Returns: its channel's configuration, a channel row (_channel_config); every
--   column NULL when there is no such message.
-- Calls: _channel_guard_shared, _channel_config, _channel_admits (inlined),
--   _channel_row_lock.
-- Tables: reads message (message_pkey: the message's channel; channel through
--   _channel_config).
-- Locks: advisory (1819111681, hashtext(channel name)) shared until the
--   transaction ends (_channel_guard_shared; past the transaction's 32nd
--   guard, its bucket guard 1819111682 instead); then, for a channel that
--   admits or has max_size, advisory (1819111683, hashint8(channel id))
--   exclusive until the transaction ends (_channel_row_lock).  The message row
--   is read, not locked: the caller locks it after.
CREATE FUNCTION @extschema@._message_channel(p_id bigint)
RETURNS @extschema@.channel
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_message record;
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    SELECT m.channel_id, m.channel INTO v_message
    FROM @extschema@.message AS m
    WHERE m.id = p_id;
    IF NOT FOUND THEN
        RETURN v_channel;
    END IF;
    PERFORM @extschema@._channel_guard_shared(v_message.channel);
    v_channel := @extschema@._channel_config(v_message.channel_id, v_message.channel);
    IF @extschema@._channel_admits(v_channel) OR v_channel.max_size IS NOT NULL THEN
        PERFORM @extschema@._channel_row_lock(v_channel.id);
    END IF;
    RETURN v_channel;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_channel(bigint) IS
'Internal: the configuration of a message''s channel, its row (when it has one) locked first, for fail, defer and cancel.';

REVOKE ALL ON FUNCTION @extschema@._message_channel(bigint) FROM PUBLIC;
