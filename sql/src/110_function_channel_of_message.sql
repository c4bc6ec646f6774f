-- Internal: the channel of message p_id, for a call that settles the message
-- or returns it to the channel (complete, cancel, defer, fail), with the
-- locks those take, in the order every writer takes them (the message row
-- is the caller's, last):
--   * the channel row, when the channel has limits: max_concurrency counts
--     its locks, max_size its removals (both in the row);
--   * with p_guard, the channel guard shared, as a producer's (the message
--     becomes deliverable again: no consumer may declare the channel empty
--     or waiting while its new time is invisible), and then the row read
--     again, for the limits and wait_at committed meanwhile.
-- NULL (every field): no such message.
CREATE FUNCTION @extschema@._channel_of_message(p_id bigint, p_guard boolean)
RETURNS @extschema@.channel
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = (SELECT m.channel_id FROM @extschema@.message AS m WHERE m.id = p_id);
    IF v_channel.max_concurrency IS NOT NULL OR v_channel.max_size IS NOT NULL THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel.id
        FOR NO KEY UPDATE;
    END IF;
    IF p_guard AND v_channel.id IS NOT NULL THEN
        PERFORM @extschema@._channel_guard_shared(v_channel.name);
        SELECT c.* INTO v_channel
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel.id;
    END IF;
    RETURN v_channel;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_of_message(bigint, boolean) IS
'Internal: the channel of a message, its row locked when it has limits and (p_guard) its guard held shared, for complete, cancel, defer and fail.';

REVOKE ALL ON FUNCTION @extschema@._channel_of_message(bigint, boolean) FROM PUBLIC;
