-- Internal: the channel's row, created with its configuration
-- (_channel_config: its pattern's, or the defaults; created_at p_now) if it
-- has none, locked FOR UPDATE until the end of the transaction: channel_set,
-- channel_pause and _channel_pattern_apply, which change what admission and
-- producers read.  The channel row lock comes first, so the row lock finds
-- the row free.  Raises 40001 when, in three tries, no row of the name can
-- be locked (dropped under it).
-- Parameters: p_channel, the channel's name; p_now, the creation time of a
--   new row (epoch ms).
-- Returns: the row as locked.
-- Calls: _channel_row_lock, _channel_id, _channel_config.
-- Tables: reads channel (channel_pkey); writes channel (insert, ON
--   CONFLICT DO NOTHING).
-- Locks: advisory (1819111683, hashint8(id)) exclusive until the
--   transaction ends (_channel_row_lock); then the channel's row FOR UPDATE
--   until the transaction ends.
CREATE FUNCTION @extschema@._channel_lock(p_channel text, p_now bigint)
RETURNS @extschema@.channel
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    PERFORM @extschema@._channel_row_lock(@extschema@._channel_id(p_channel));
    FOR v_try IN 1..3 LOOP
        v_channel := @extschema@._channel_config(@extschema@._channel_id(p_channel), p_channel);
        v_channel.created_at := p_now;
        INSERT INTO @extschema@.channel
        SELECT (v_channel).*
        ON CONFLICT DO NOTHING;
        SELECT c.* INTO v_channel
        FROM @extschema@.channel AS c
        WHERE c.id = @extschema@._channel_id(p_channel) AND c.name = p_channel
        FOR UPDATE;
        IF FOUND THEN
            RETURN v_channel;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'lonnymq: channel "%" was dropped concurrently', p_channel
        USING ERRCODE = '40001';
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_lock(text, bigint) IS
'Internal: get or create a channel''s row, locked FOR UPDATE for the rest of the transaction.';

REVOKE ALL ON FUNCTION @extschema@._channel_lock(text, bigint) FROM PUBLIC;
