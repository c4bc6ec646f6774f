-- Internal: whether a message that becomes ready behind an early message of
-- its channel (a burst of priority messages at the channel's back) is early
-- too: it must not pass the latest of the channel's early messages, nor, by
-- more than p_margin, the channel's last ready message that is not early
-- (stepping back over the burst).  The rare case of _message_place.
-- (The channel's last ready message is early: the latest early one is at
-- least as late.)  SQL, but with sub-selects: not inlined, called only when
-- the channel's last ready message is early.
-- Parameters: p_channel_id, the message's channel; p_bound, the epoch's
--   bound; p_dequeue_at, the message's dequeue_at; p_margin, how far (ms)
--   it may sort before the last ready message that is not early (as
--   _message_place's).
-- Returns: TRUE when the message is early.
-- Calls: none.
-- Tables: reads message (message_early_ix: the channel's latest early
--   message; message_channel_ix, backwards from the channel's last place:
--   its last ready message that is not early).
-- Locks: none.
CREATE FUNCTION @extschema@._message_early_behind(
    p_channel_id bigint,
    p_bound bigint,
    p_dequeue_at bigint,
    p_margin bigint
)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT
        COALESCE(p_dequeue_at < (
            SELECT x.dequeue_at FROM @extschema@.message AS x
            WHERE x.channel_id = p_channel_id AND x.is_early AND x.position IS NOT NULL
            ORDER BY x.dequeue_at DESC, x.id DESC
            LIMIT 1
        ), FALSE)
        OR COALESCE(p_dequeue_at < (
            SELECT r.dequeue_at - p_margin FROM @extschema@.message AS r
            WHERE r.channel_id = p_channel_id AND r.position >= p_bound AND NOT r.is_early
            ORDER BY r.position DESC NULLS LAST
            LIMIT 1
        ), FALSE)
$$;

COMMENT ON FUNCTION @extschema@._message_early_behind(bigint, bigint, bigint, bigint) IS
'Internal: whether a message placed behind an early message of its channel is early too.';

REVOKE ALL ON FUNCTION @extschema@._message_early_behind(bigint, bigint, bigint, bigint) FROM PUBLIC;
