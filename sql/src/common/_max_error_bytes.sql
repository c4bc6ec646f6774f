-- Internal: the largest error text message_fail records in a message's
-- attempt log, in bytes (1 MiB).  A constant function: the planner folds it
-- into the plans of the functions that test against it, once per session.
-- Parameters: none.
-- Returns: 1048576, a bigint.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._max_error_bytes()
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 1048576::bigint
$$;

COMMENT ON FUNCTION @extschema@._max_error_bytes() IS
'Internal: the largest error text message_fail records, in bytes (1 MiB).';

REVOKE ALL ON FUNCTION @extschema@._max_error_bytes() FROM PUBLIC;
