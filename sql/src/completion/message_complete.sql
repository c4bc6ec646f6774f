-- Complete (delete) a locked message, presenting its fencing token.
-- Returns false, changing nothing, when the token is stale or the message is
-- not locked (deferred, already completed, purged).  For an unconstrained
-- channel the channel row is read, never locked or written.  A channel with
-- retain_history keeps a copy in message_history; a keyed message's key
-- stays claimed for the channel's dedup window.
--
-- The completion of a batch of one (_message_complete_set).
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
