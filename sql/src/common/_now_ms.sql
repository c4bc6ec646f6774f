-- The transaction's start (now()) in epoch milliseconds: a message's default
-- dequeue_at.  Internal: as _clock_ms, the epoch of the timestamptz itself
-- (exact numeric since PostgreSQL 14; now() is never infinite), not
-- to_epoch(now()), whose infinity test the worker's path does not need.
-- Parameters: none.
-- Returns: floor(now() in epoch seconds * 1000), a bigint.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._now_ms()
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.floor(EXTRACT(EPOCH FROM pg_catalog.now()) OPERATOR(pg_catalog.*) 1000)::bigint
$$;

COMMENT ON FUNCTION @extschema@._now_ms() IS
'Internal: now() in epoch milliseconds.';

REVOKE ALL ON FUNCTION @extschema@._now_ms() FROM PUBLIC;
