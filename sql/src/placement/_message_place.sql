-- Internal: the turn (position) in the round order of a message of channel
-- p_channel_id that becomes ready now: its channel's first place at or after
-- the bound, the front (the first ready position: the round being served)
-- and its channel's last ready position plus one round, so that a channel
-- has one turn per round, and a channel that becomes ready joins the current
-- round (or the next, when its place in this one has passed).
--   is_early: the message sorts more than p_margin before its channel's
--     last ready message (a priority message's past dequeue_at, a long
--     transaction's now(), a recovered lock): a turn of its channel then
--     delivers it before the turn's holder (message_complete_dequeue,
--     _message_turns_resolve), so that the channel's messages come out in
--     (dequeue_at, id) order.
--     A new message's margin is a second when its dequeue_at is the default
--     (its transaction's start): within it, such messages keep the order in
--     which they were created, because concurrent producers' transaction
--     starts differ by milliseconds and every one of them would otherwise
--     cost a swap of turns.  A dequeue_at the producer gave is compared
--     exactly, and so is a message that comes back (promoted, retried,
--     admitted: margin 0).  When the channel's last ready message is itself
--     early (a burst of priority messages), _message_early_behind decides.
--   last_dequeue_at, last_is_early: the channel's last ready message
--     (message_create_batch decides is_early for each of its messages).
-- SQL, STABLE and a table function: inlined into the statement that calls
-- it (message_create's first statement, the UPDATE of a promotion or an
-- admission, message_create_batch's SELECT), so that a placement costs two
-- index probes and no call.
-- Parameters: p_channel_id, the message's channel; p_bound, the epoch's
--   bound (_epoch_enter; NULL, as a SERIALIZABLE producer passes: no place);
--   p_dequeue_at, the message's dequeue_at; p_margin, how far (ms) it may
--   sort before the channel's last ready message and not be early.
-- Returns: one row: place, its position (NULL when p_bound is NULL);
--   is_early; last_dequeue_at and last_is_early of the channel's last
--   ready message (NULL when it has none).
-- Calls: _message_early_behind (only behind an early message), _round_size
--   (a constant).
-- Tables: reads message (message_ready_ix: the front; message_channel_ix:
--   the channel's last turn), from the bound.
-- Locks: none.
CREATE FUNCTION @extschema@._message_place(
    p_channel_id bigint,
    p_bound bigint,
    p_dequeue_at bigint,
    p_margin bigint
)
RETURNS TABLE (place bigint, is_early boolean, last_dequeue_at bigint, last_is_early boolean)
LANGUAGE sql STABLE
AS $$
    SELECT
        s.low + ((p_channel_id - s.low) & (@extschema@._round_size() - 1)),
        CASE
            WHEN l.is_early
                THEN @extschema@._message_early_behind(p_channel_id, p_bound, p_dequeue_at, p_margin)
            ELSE COALESCE(p_dequeue_at < l.dequeue_at - p_margin, FALSE)
        END,
        l.dequeue_at,
        l.is_early
    FROM (SELECT) AS one
    LEFT JOIN LATERAL (
        SELECT r.position
        FROM @extschema@.message AS r
        WHERE r.position >= p_bound
        ORDER BY r.position
        LIMIT 1
    ) AS f ON TRUE
    LEFT JOIN LATERAL (
        SELECT r.position, r.dequeue_at, r.is_early
        FROM @extschema@.message AS r
        WHERE r.channel_id = p_channel_id AND r.position >= p_bound
        ORDER BY r.position DESC NULLS LAST
        LIMIT 1
    ) AS l ON TRUE
    CROSS JOIN LATERAL (SELECT GREATEST(p_bound, f.position, l.position + @extschema@._round_size()) AS low) AS s
$$;

COMMENT ON FUNCTION @extschema@._message_place(bigint, bigint, bigint, bigint) IS
'Internal: the turn in the round order of a message that becomes ready now, and whether it is early (sorts more than its margin before its channel''s last ready message).';

REVOKE ALL ON FUNCTION @extschema@._message_place(bigint, bigint, bigint, bigint) FROM PUBLIC;
