-- Internal: the longest duration any argument or setting may give, in
-- milliseconds (365 days): a lock, a release interval, a backoff, a dedup
-- window, a schedule's period.  A constant function: the planner folds it
-- into the plans of the functions that test against it, once per session.
-- (The CHECK constraints of channel and schedule repeat the number: a
-- function there would be inlined again by every statement that writes
-- those rows.)
-- Parameters: none.
-- Returns: 31536000000 (365 days in ms), a bigint.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._max_duration_ms()
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 31536000000::bigint
$$;

COMMENT ON FUNCTION @extschema@._max_duration_ms() IS
'Internal: the longest duration an argument or setting may give, in ms (365 days).';

REVOKE ALL ON FUNCTION @extschema@._max_duration_ms() FROM PUBLIC;
