-- Internal: the channel a producer writes to, created with no limits when it
-- does not exist, read while holding the channel guard shared until the
-- producer's transaction ends.  The guard does not conflict with other
-- producers nor with consumers; it only keeps a consumer from declaring the
-- channel empty or waiting while this producer's message is still invisible
-- to it.  The row is read after the guard is taken, so (in READ COMMITTED)
-- it shows any such declaration made before.
CREATE FUNCTION @extschema@._channel_for_producer(p_channel text, p_now bigint)
RETURNS @extschema@.channel
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    PERFORM @extschema@._channel_guard_shared(p_channel);
    FOR v_try IN 1..3 LOOP
        SELECT c.* INTO v_channel
        FROM @extschema@.channel AS c
        WHERE c.name = p_channel;
        IF FOUND THEN
            RETURN v_channel;
        END IF;
        INSERT INTO @extschema@.channel (name, created_at)
        VALUES (p_channel, p_now)
        ON CONFLICT (name) DO NOTHING;
    END LOOP;
    RAISE EXCEPTION 'lonnymq: channel "%" was dropped concurrently', p_channel
        USING ERRCODE = '40001';
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_for_producer(text, bigint) IS
'Internal: get or create a channel, holding its guard shared for the rest of the transaction.';

REVOKE ALL ON FUNCTION @extschema@._channel_for_producer(text, bigint) FROM PUBLIC;
