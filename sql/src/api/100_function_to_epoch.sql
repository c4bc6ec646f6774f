-- floor(epoch seconds * 1000), exact at every instant.  The difference from
-- the epoch is an interval of days and microseconds (no months), whose
-- EXTRACT(EPOCH ...) is an exact numeric (PostgreSQL 14+), so nothing is
-- rounded before floor(); floor() rounds toward minus infinity, so instants
-- before 1970 are exact too.  Plain SQL built only from immutable functions
-- (EXTRACT from a timestamptz would be STABLE), so that the planner inlines
-- it; the body names every operator explicitly because an inlined function
-- runs with the caller's search_path.
CREATE FUNCTION @extschema@.to_epoch(p_at timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT pg_catalog.floor(
        EXTRACT(
            EPOCH FROM p_at OPERATOR(pg_catalog.-) '1970-01-01 00:00:00+00'::pg_catalog.timestamptz
        ) OPERATOR(pg_catalog.*) 1000
    )::bigint
$$;

COMMENT ON FUNCTION @extschema@.to_epoch(timestamptz) IS
'Epoch milliseconds of a timestamp: floor(epoch seconds * 1000). Exact at every instant, negative before 1970.';

-- In every access set (_access_functions), not PUBLIC's: a role without a
-- set may call nothing of lonnymq.
REVOKE ALL ON FUNCTION @extschema@.to_epoch(timestamptz) FROM PUBLIC;
