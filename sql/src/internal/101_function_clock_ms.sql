-- The wall clock in epoch milliseconds.  Internal: dequeue, locks and
-- readiness use the wall clock, not the transaction start (now()), so that a
-- call inside a long transaction neither misses messages that became ready
-- nor hands out locks that are already partly expired.
CREATE FUNCTION @extschema@._clock_ms()
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
    SELECT @extschema@.to_epoch(pg_catalog.clock_timestamp())
$$;

COMMENT ON FUNCTION @extschema@._clock_ms() IS
'Internal: clock_timestamp() in epoch milliseconds.';

REVOKE ALL ON FUNCTION @extschema@._clock_ms() FROM PUBLIC;
