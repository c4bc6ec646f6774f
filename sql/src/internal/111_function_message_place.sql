-- Internal: the turn (position) in the round order of a message of channel
-- p_channel_id that becomes ready now: its channel's first place at or after
-- the bound, the front (the first ready position: the round being served)
-- and its channel's last ready position plus one round, so that a channel
-- has one turn per round, and a channel that becomes ready joins the current
-- round (or the next, when its place in this one has passed).
--   is_early: the message sorts more than p_margin before its channel's
--     last ready message (a priority message's past dequeue_at, a long
--     transaction's now(), a recovered lock): a turn of its channel then
--     delivers it before the turn's holder (message_complete_dequeue), so
--     that the channel's messages come out in (dequeue_at, id) order.
--     A new message's margin is a second when its dequeue_at is the default
--     (its transaction's start): within it, such messages keep the order in
--     which they were created, because concurrent producers' transaction
--     starts differ by milliseconds and every one of them would otherwise
--     cost a swap of turns.  A dequeue_at the producer gave is compared
--     exactly.  A message
--     that comes back (promoted, retried, admitted) is compared exactly
--     (margin 0): those are rare, and a recovered lock is delivered in the
--     position of its expiry.  Behind an early message (a burst of priority
--     messages) the comparison is exact too.
--   last_dequeue_at, last_is_early: the channel's last ready message
--     (message_create_batch decides is_early for each of its messages).
-- Parameters: p_channel_id; p_bound (_epoch_enter); p_dequeue_at;
--   p_margin (ms).
-- Tables: reads message (message_ready_ix: the front; message_channel_ix:
--   the channel's last turn), from the bound.
CREATE FUNCTION @extschema@._message_place(
    p_channel_id bigint,
    p_bound bigint,
    p_dequeue_at bigint,
    p_margin bigint,
    OUT place bigint,
    OUT is_early boolean,
    OUT last_dequeue_at bigint,
    OUT last_is_early boolean
)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    SELECT GREATEST(p_bound, f.position, l.position + 1048576), l.dequeue_at, l.is_early
    INTO place, last_dequeue_at, last_is_early
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
    ) AS l ON TRUE;
    place := place + ((p_channel_id - place) & 1048575);
    is_early := COALESCE(p_dequeue_at < last_dequeue_at - CASE WHEN last_is_early THEN 0 ELSE p_margin END, FALSE);
    IF last_is_early AND NOT is_early THEN
        -- Behind early messages (a burst of priority): what the message must
        -- not pass is the latest of them, or the channel's last message
        -- that is not early (stepping back over the burst).
        SELECT COALESCE(p_dequeue_at < (
            SELECT pg_catalog.max(r.dequeue_at)
            FROM (
                SELECT x.dequeue_at FROM @extschema@.message AS x
                WHERE x.channel_id = p_channel_id AND x.is_early AND x.position IS NOT NULL
                ORDER BY x.dequeue_at DESC, x.id DESC
                LIMIT 1
            ) AS r
        ), FALSE) OR COALESCE(p_dequeue_at < (
            SELECT r.dequeue_at - p_margin FROM @extschema@.message AS r
            WHERE r.channel_id = p_channel_id AND r.position >= p_bound AND NOT r.is_early
            ORDER BY r.position DESC NULLS LAST
            LIMIT 1
        ), FALSE)
        INTO is_early;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_place(bigint, bigint, bigint, bigint) IS
'Internal: the turn in the round order of a message that becomes ready now, and whether it is early (sorts more than a second before its channel''s last ready message).';

REVOKE ALL ON FUNCTION @extschema@._message_place(bigint, bigint, bigint, bigint) FROM PUBLIC;
