-- Internal: the messages a take locks, up to p_count of a channel's first
-- deliverable ones in (dequeue_at, id) order, SKIP LOCKED: its ready
-- messages and expired locks from its floor p_from, or, at max_concurrency
-- (p_expired_only), only its expired counted locks, found through
-- message_locked_ix, never its ready backlog.  Two small statements of
-- which a call runs one, rather than one statement with a gated-off leg:
-- every plan node of a statement is initialised on every execution, and
-- this way a one-message dequeue costs 4% less (doc/dequeue-design.md).
-- Runs with its caller's settings (message_dequeue's plan pinning).
CREATE FUNCTION @extschema@._message_head(
    p_channel_id bigint,
    p_from bigint,
    p_now bigint,
    p_count integer,
    p_expired_only boolean
)
RETURNS TABLE (id bigint, dequeue_at bigint, is_locked boolean, num_failures integer)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    IF p_expired_only THEN
        RETURN QUERY
        SELECT m.id, m.dequeue_at, m.is_locked, m.num_failures
        FROM @extschema@.message AS m
        WHERE
            m.channel_id = p_channel_id
            AND m.is_locked AND m.is_counted AND m.dequeue_at <= p_now
        ORDER BY m.dequeue_at, m.id
        LIMIT p_count
        FOR UPDATE SKIP LOCKED;
    ELSE
        RETURN QUERY
        SELECT q.id, q.dequeue_at, q.is_locked, q.num_failures
        FROM @extschema@.message AS q
        WHERE q.channel_id = p_channel_id AND q.dequeue_at BETWEEN p_from AND p_now
        ORDER BY q.dequeue_at, q.id
        LIMIT p_count
        FOR UPDATE SKIP LOCKED;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_head(bigint, bigint, bigint, integer, boolean) IS
'Internal: lock the messages a take of message_dequeue delivers: a channel''s first deliverable ones from its floor, or at max_concurrency its expired locks (SKIP LOCKED).';

REVOKE ALL ON FUNCTION @extschema@._message_head(bigint, bigint, bigint, integer, boolean) FROM PUBLIC;
