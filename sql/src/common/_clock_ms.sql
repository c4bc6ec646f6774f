-- The wall clock in epoch milliseconds.  Internal: dequeue, locks and
-- readiness use the wall clock, not the transaction start (now()), so that a
-- call inside a long transaction neither misses messages that became ready
-- nor hands out locks that are already partly expired.  Not
-- to_epoch(clock_timestamp()): to_epoch reads its argument twice (its
-- infinity test), so with a volatile argument it would not be inlined.  A
-- VOLATILE function may take the epoch of the timestamptz itself (STABLE,
-- exact numeric since PostgreSQL 14); the clock is never infinite.
-- Parameters: none.
-- Returns: floor(clock_timestamp() in epoch seconds * 1000), a bigint.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._clock_ms()
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.floor(EXTRACT(EPOCH FROM pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint
$$;

COMMENT ON FUNCTION @extschema@._clock_ms() IS
'Internal: clock_timestamp() in epoch milliseconds.';

REVOKE ALL ON FUNCTION @extschema@._clock_ms() FROM PUBLIC;
