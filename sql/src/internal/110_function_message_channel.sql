-- Internal: the configuration of message p_id's channel, for a call that
-- settles the message or returns it to its channel (fail, defer, cancel),
-- with the channel's row locked when it has one (admission or max_size
-- counts will change): channel rows before message rows, as completions
-- lock them (see _message_complete_set), so these calls do not deadlock
-- each other.  id NULL: no such message.
-- Parameters: p_id.
-- Returns: a channel row (_channel_config).
-- Calls: _channel_config.
-- Tables: reads message; channel (lock).
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
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = v_message.channel_id AND c.name = v_message.channel
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        v_channel := @extschema@._channel_defaults(v_message.channel, 0);
    END IF;
    RETURN v_channel;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_channel(bigint) IS
'Internal: the configuration of a message''s channel, its row (when it has one) locked first, for fail, defer and cancel.';

REVOKE ALL ON FUNCTION @extschema@._message_channel(bigint) FROM PUBLIC;
