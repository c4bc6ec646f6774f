-- Internal: the lock of a channel's row, a transaction-scoped advisory
-- lock keyed by the channel's id (1819111683, hashint8(id)).  Every call
-- holds it before it locks or writes a channel row, and nothing else locks
-- channel rows, so a call that holds it finds the row free: its row lock
-- never waits.  Why not the row lock itself: a call that holds channel rows
-- (a completion's) and tries another one FOR UPDATE SKIP LOCKED (a take, a
-- promotion) may still wait, when the row version its snapshot sees was
-- updated by a transaction that just ended (PostgreSQL then locks the newer
-- versions, waiting for their holder, SKIP LOCKED or not), and two such
-- calls deadlocked (soak test).  An advisory try never waits.
-- Calls that take several hold them in key order (_channel_rows_lock for a
-- completion, _channel_pattern_apply for a pattern's followers), so that
-- they do not deadlock each other.  A key collision only makes two
-- channels' admissions wait for each other.
--
-- _channel_row_lock: take it, waiting for its holder.
-- Parameters: p_channel_id, the channel's id (_channel_id).
-- Returns: nothing.
-- Calls: none.
-- Tables: none.
-- Locks: advisory (1819111683, hashint8(p_channel_id)) exclusive, waited
--   for, until the transaction ends.
CREATE FUNCTION @extschema@._channel_row_lock(p_channel_id bigint)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(1819111683, pg_catalog.hashint8(p_channel_id))
$$;

COMMENT ON FUNCTION @extschema@._channel_row_lock(bigint) IS
'Internal: hold the lock of a channel''s row until the end of the transaction (waits for its holder); taken before a channel row is locked or written.';

REVOKE ALL ON FUNCTION @extschema@._channel_row_lock(bigint) FROM PUBLIC;

-- Internal: try the lock of a channel's row (_channel_row_lock); never
-- waits.  Takes (_channel_release_try_lock), promotions (_message_promote)
-- and tick's removal of drained followers' rows skip a channel whose row
-- lock is held.
-- Parameters: p_channel_id, the channel's id (_channel_id).
-- Returns: whether the lock is now held.
-- Calls: none.
-- Tables: none.
-- Locks: advisory (1819111683, hashint8(p_channel_id)) exclusive, tried,
--   until the transaction ends when taken.
CREATE FUNCTION @extschema@._channel_row_try_lock(p_channel_id bigint)
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_try_advisory_xact_lock(1819111683, pg_catalog.hashint8(p_channel_id))
$$;

COMMENT ON FUNCTION @extschema@._channel_row_try_lock(bigint) IS
'Internal: take the lock of a channel''s row unless another transaction holds it; never waits.';

REVOKE ALL ON FUNCTION @extschema@._channel_row_try_lock(bigint) FROM PUBLIC;
