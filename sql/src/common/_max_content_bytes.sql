-- Internal: the largest content or state a message may hold, in bytes
-- (16 MiB).  A constant function: the planner folds it into the plans of
-- the functions that test against it, once per session.
-- Parameters: none.
-- Returns: 16777216.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._max_content_bytes()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 16777216
$$;

COMMENT ON FUNCTION @extschema@._max_content_bytes() IS
'Internal: the largest content or state a message may hold, in bytes (16 MiB).';

REVOKE ALL ON FUNCTION @extschema@._max_content_bytes() FROM PUBLIC;
