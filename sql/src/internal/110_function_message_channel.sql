-- Internal: the configuration of message p_id's channel, for a call that
-- settles the message or returns it to its channel (fail, defer, cancel),
-- with the channel's row lock (_channel_row_lock) held when it has a row
-- (admission or max_size counts will change): channel rows before message
-- rows, as completions lock them (see _message_complete_set), so these
-- calls do not deadlock each other.  id NULL: no such message.
-- Parameters: p_id.
-- Returns: a channel row (_channel_config).
-- Calls: _channel_guard_shared, _channel_row_lock, _channel_config.
-- Tables: reads message, channel.
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
    -- (A row's configuration is read after its lock, by the next
    -- statement: the row as its last holder left it.)
    PERFORM @extschema@._channel_row_lock(c.id)
    FROM @extschema@.channel AS c
    WHERE c.id = v_message.channel_id AND c.name = v_message.channel;
    RETURN @extschema@._channel_config(v_message.channel_id, v_message.channel);
END;
$$;

COMMENT ON FUNCTION @extschema@._message_channel(bigint) IS
'Internal: the configuration of a message''s channel, its row (when it has one) locked first, for fail, defer and cancel.';

REVOKE ALL ON FUNCTION @extschema@._message_channel(bigint) FROM PUBLIC;
