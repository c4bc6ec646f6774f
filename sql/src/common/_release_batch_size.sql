-- Internal: at most how many of an ended parent's edges one call resolves
-- (100); the rest are resolved by its release row, the same number at each
-- promotion that takes it (a fan-out of 10,000 children: 100 calls).  The
-- prototype measured 2,851 buffers for a call that releases 100 children
-- (doc/workflows-design.md).  A constant function: folded into the plans
-- that use it.
-- Parameters: none.
-- Returns: 100.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._release_batch_size()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 100
$$;

COMMENT ON FUNCTION @extschema@._release_batch_size() IS
'Internal: at most how many dependents of an ended message one call resolves (100).';

REVOKE ALL ON FUNCTION @extschema@._release_batch_size() FROM PUBLIC;
