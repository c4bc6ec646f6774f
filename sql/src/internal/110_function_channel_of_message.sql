-- Internal: the channel of message p_id, for a call that settles the message
-- or returns it to the channel, with the locks that call needs, in the order
-- every writer takes them (the message row is the caller's, last):
--   * the channel row, when the call changes a count that the channel keeps:
--     p_unlocks (the message leaves its lock: num_locked, with
--     max_concurrency) or p_removes (it may leave the channel: num_removed,
--     with max_size);
--   * with p_returns (the message becomes deliverable again), the channel
--     guard shared, as a producer's (no consumer may declare the channel
--     empty or waiting while its new time is invisible), and then the row
--     read again, for the limits and wait_at committed meanwhile.
-- cancel: removes; defer: unlocks, returns; fail: all three (complete has
-- its own set-based lookup: _message_complete_set).  NULL (every field): no
-- such message.
CREATE FUNCTION @extschema@._channel_of_message(
    p_id bigint,
    p_unlocks boolean,
    p_removes boolean,
    p_returns boolean
)
RETURNS @extschema@.channel
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
BEGIN
    SELECT c.* INTO v_channel
    FROM @extschema@.channel AS c
    WHERE c.id = (SELECT m.channel_id FROM @extschema@.message AS m WHERE m.id = p_id);
    IF p_unlocks AND v_channel.max_concurrency IS NOT NULL OR p_removes AND v_channel.max_size IS NOT NULL THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel.id
        FOR NO KEY UPDATE;
    END IF;
    IF p_returns AND v_channel.id IS NOT NULL THEN
        PERFORM @extschema@._channel_guard_shared(v_channel.name);
        SELECT c.* INTO v_channel
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel.id;
    END IF;
    RETURN v_channel;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_of_message(bigint, boolean, boolean, boolean) IS
'Internal: the channel of a message, its row locked when the call changes one of its counts and (p_returns) its guard held shared, for cancel, defer and fail.';

REVOKE ALL ON FUNCTION @extschema@._channel_of_message(bigint, boolean, boolean, boolean) FROM PUBLIC;
