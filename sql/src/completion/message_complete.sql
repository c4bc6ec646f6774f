-- Complete (delete) a locked message, presenting its fencing token.  Returns
-- false, changing nothing, when the token is stale or the message is not
-- locked (deferred, already completed, purged) or is locked by another role.
-- A channel without limits or max_size has its row (if any) read, never locked
-- or written.  A channel with retain_history keeps a copy in message_history;
-- a keyed message's key stays claimed for the channel's dedup window; an
-- admitted message's channel admits its next.
--
-- The completion of a batch of one (_message_complete_set).
-- Parameters: p_id, the message; p_num_attempts, its fencing token (the
--   num_attempts of the delivery).
-- Returns: whether it was completed.
-- Calls: _check_token, _caller_role (inlined), _message_complete_set.
-- Tables: none (message, message_history, message_key and channel through
--   _message_complete_set)
-- Locks: none of its own; _message_complete_set's (the channel row lock,
--   1819111683, of a limited or max_size channel, then the message row it
--   deletes).
CREATE FUNCTION @extschema@.message_complete(
    p_id bigint,
    p_num_attempts integer
)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_id IS NULL OR p_num_attempts IS NULL THEN
        PERFORM @extschema@._check_token(p_id, p_num_attempts);
    END IF;
    RETURN pg_catalog.cardinality(
        @extschema@._message_complete_set(ARRAY[p_id], ARRAY[p_num_attempts], @extschema@._caller_role())
    ) = 1;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_complete(bigint, integer) IS
'Complete a locked message: deletes it (keeping a copy in message_history when the channel retains history). Returns false (nothing changed) when p_num_attempts is not the current fencing token or the message is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_complete(bigint, integer) FROM PUBLIC;
