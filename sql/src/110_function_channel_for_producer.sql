-- Internal: the channel a producer writes to, created with no limits when it
-- does not exist, and locked FOR KEY SHARE until the producer's transaction
-- ends.  KEY SHARE does not conflict with other producers nor with consumers
-- taking their turn (FOR NO KEY UPDATE); it only keeps a consumer from
-- declaring the channel empty or waiting (which takes FOR UPDATE) while this
-- producer's message is still invisible to it.
CREATE FUNCTION @extschema@._channel_for_producer(p_channel text, p_now bigint)
RETURNS @extschema@.channel
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    FOR v_try IN 1..3 LOOP
        SELECT c.* INTO v_channel
        FROM @extschema@.channel AS c
        WHERE c.name = p_channel
        FOR KEY SHARE;
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
'Internal: get or create a channel and lock it FOR KEY SHARE for the rest of the transaction.';

REVOKE ALL ON FUNCTION @extschema@._channel_for_producer(text, bigint) FROM PUBLIC;
