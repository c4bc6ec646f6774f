-- Deliver up to p_limit messages, locking each for p_lock_ms: a
-- message_complete_dequeue with nothing to complete.
-- Parameters: p_lock_ms, how long each delivery's lock lasts (ms); p_limit,
--   at most how many messages to deliver (1 to 1000; NULL: 1); p_channel,
--   deliver only from this channel (NULL: any).
-- Returns: message_complete_dequeue's rows: one delivery per message taken,
--   in turn order; no rows when nothing is ready.
-- Calls: message_complete_dequeue.
-- Tables: none (message_complete_dequeue's)
-- Locks: none directly (message_complete_dequeue's, without completions).
CREATE FUNCTION @extschema@.message_dequeue(
    p_lock_ms bigint,
    p_limit integer DEFAULT 1,
    p_channel text DEFAULT NULL
)
RETURNS SETOF @extschema@.delivery
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT * FROM @extschema@.message_complete_dequeue(NULL, NULL, p_lock_ms, p_limit, p_channel);
END;
$$;

COMMENT ON FUNCTION @extschema@.message_dequeue(bigint, integer, text) IS
'Deliver up to p_limit ready messages (default 1), channels served round-robin within their limits, each locked for p_lock_ms. Expired locks are recovered here (is_recovered). num_attempts is the fencing token for complete, defer and heartbeat. Returns no rows when nothing is ready.';

REVOKE ALL ON FUNCTION @extschema@.message_dequeue(bigint, integer, text) FROM PUBLIC;
