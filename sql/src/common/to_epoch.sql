-- floor(epoch seconds * 1000), exact at every instant.  The difference from
-- the epoch is an interval of days and microseconds (no months), whose
-- EXTRACT(EPOCH ...) is an exact numeric (PostgreSQL 14+), so nothing is
-- rounded before floor(); floor() rounds toward minus infinity, so instants
-- before 1970 are exact too.  Plain SQL built only from immutable functions
-- (EXTRACT from a timestamptz would be STABLE), so that the planner inlines
-- it; the body names every operator explicitly because an inlined function
-- runs with the caller's search_path.
-- ±infinity: 22008 on every version.  Before 17, subtracting an infinite
-- timestamp raised it ("cannot subtract infinite timestamps"); from 17 the
-- difference is an infinite interval, and the cast of its infinite epoch to
-- bigint raised 0A000 or 22003 by minor release.  So an infinite p_at takes
-- a branch that raises 22008 ("interval out of range") from built-in
-- functions alone: make_interval refuses an infinite number of seconds on
-- every version since 14, and no helper of ours needs EXECUTE granted to the
-- caller (an inlined function runs as the caller).  The test reads p_at a
-- second time, so the planner inlines a call whose argument is not volatile
-- (a column, a constant, now()); a volatile one (clock_timestamp()) is
-- evaluated once and the function called.  Not STRICT: PostgreSQL inlines a
-- strict function only if its body is strict, and CASE is not; NULL takes
-- the ELSE branch and gives NULL.  _clock_ms, on the worker's path, takes
-- the epoch of clock_timestamp() itself for that reason.
-- Parameters: p_at, a finite timestamp, or NULL.
-- Returns: epoch milliseconds; NULL for NULL; raises 22008 for ±infinity.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@.to_epoch(p_at timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN NOT pg_catalog.isfinite(p_at)
            THEN EXTRACT(
                EPOCH FROM pg_catalog.make_interval(
                    secs => EXTRACT(EPOCH FROM pg_catalog.timezone('UTC', p_at))::float8
                )
            )::bigint
        ELSE pg_catalog.floor(
            EXTRACT(
                EPOCH FROM p_at OPERATOR(pg_catalog.-) '1970-01-01 00:00:00+00'::pg_catalog.timestamptz
            ) OPERATOR(pg_catalog.*) 1000
        )::bigint
    END
$$;

COMMENT ON FUNCTION @extschema@.to_epoch(timestamptz) IS
'Epoch milliseconds of a timestamp: floor(epoch seconds * 1000). Exact at every instant, negative before 1970.';

-- In every access set (_access_functions), not PUBLIC's: a role without a
-- set may call nothing of lonnymq.
REVOKE ALL ON FUNCTION @extschema@.to_epoch(timestamptz) FROM PUBLIC;
