-- Complete many locked messages with one call: p_ids[k] with fencing token
-- p_num_attempts[k].  Returns how many were completed; a stale token, a
-- message that is not locked or is locked by another role is skipped (as
-- message_complete's false).  Set-based, about two primary-key probes per
-- message: _message_complete_set.
-- Parameters: p_ids, the messages (at most 10000); p_num_attempts, their
--   fencing tokens, as many.
-- Returns: how many were completed.  Invalid arrays: 22004, 22023
--   (_check_pairs).
-- Calls: _caller_role (inlined), _message_complete_set.
-- Tables: none (message, message_history, message_key and channel through
--   _message_complete_set)
-- Locks: none of its own; _message_complete_set's (the channel row locks,
--   1819111683, of limited and max_size channels, in key order, then the
--   message rows it deletes).
CREATE FUNCTION @extschema@.message_complete_batch(
    p_ids bigint[],
    p_num_attempts integer[]
)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN pg_catalog.cardinality(@extschema@._message_complete_set(p_ids, p_num_attempts, @extschema@._caller_role()));
END;
$$;

COMMENT ON FUNCTION @extschema@.message_complete_batch(bigint[], integer[]) IS
'Complete many locked messages: p_ids[k] with fencing token p_num_attempts[k]. Returns how many were completed (stale tokens and unlocked messages are skipped). Array lengths must match (22023).';

REVOKE ALL ON FUNCTION @extschema@.message_complete_batch(bigint[], integer[]) FROM PUBLIC;
