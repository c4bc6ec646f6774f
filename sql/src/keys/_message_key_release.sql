-- Internal: message p_message_id, holding (channel, key), was completed or
-- dead-lettered (p_window_ms: the channel's dedup window, the claim then lasts
-- that long) or cancelled, or not stored after all (message_create refused by
-- max_size) (p_window_ms 0: the claim goes at once).  Only the message's own
-- claim is touched: a claim another message has taken over since is left
-- alone.
-- Parameters: p_channel_id, p_key, the claim; p_message_id, the message that
--   held it; p_window_ms, how long the claim lasts (0 or less: deleted now);
--   p_now, the clock the window starts from.
-- Returns: nothing.
-- Calls: none.
-- Tables: writes message_key (by message_key_pkey: expires_at set, or the row
--   deleted).
-- Locks: the claim row it updates or deletes.
CREATE FUNCTION @extschema@._message_key_release(
    p_channel_id bigint,
    p_key text,
    p_message_id bigint,
    p_window_ms bigint,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF p_window_ms > 0 THEN
        UPDATE @extschema@.message_key AS k
        SET expires_at = p_now + p_window_ms
        WHERE
            k.channel_id = p_channel_id
            AND k.key = p_key
            AND k.message_id = p_message_id;
    ELSE
        DELETE FROM @extschema@.message_key AS k
        WHERE
            k.channel_id = p_channel_id
            AND k.key = p_key
            AND k.message_id = p_message_id;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_key_release(bigint, text, bigint, bigint, bigint) IS
'Internal: a keyed message left the queue: its claim lasts the dedup window, or goes at once.';

REVOKE ALL ON FUNCTION @extschema@._message_key_release(bigint, text, bigint, bigint, bigint) FROM PUBLIC;
