-- Internal: the channel's row, created (with no limits) if it does not
-- exist, locked FOR UPDATE until the end of the transaction: channel_set
-- and channel_pause, which must wait for every consumer serving the
-- channel.  Raises 40001 when the channel keeps being dropped under it.
CREATE FUNCTION @extschema@._channel_lock(p_channel text, p_now bigint)
RETURNS @extschema@.channel
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    FOR v_try IN 1..3 LOOP
        INSERT INTO @extschema@.channel (name, created_at)
        VALUES (p_channel, p_now)
        ON CONFLICT (name) DO NOTHING;
        SELECT c.* INTO v_channel
        FROM @extschema@.channel AS c
        WHERE c.name = p_channel
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
'Internal: get or create a channel, its row locked FOR UPDATE for the rest of the transaction.';

REVOKE ALL ON FUNCTION @extschema@._channel_lock(text, bigint) FROM PUBLIC;
