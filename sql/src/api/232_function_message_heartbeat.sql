-- Extend a locked message's lock to at least now + p_lock_ms.  Never
-- shortens a lock.
CREATE FUNCTION @extschema@.message_heartbeat(
    p_id bigint,
    p_num_attempts integer,
    p_lock_ms bigint
)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    PERFORM @extschema@._check_lock_ms(p_lock_ms);
    -- A writer of message_due_ix: the epoch first, then the clock.  A lock
    -- that had expired and was promoted (ready again) is taken back out of
    -- the round order: its holder keeps it.
    PERFORM @extschema@._epoch_enter();
    UPDATE @extschema@.message AS m
    SET
        dequeue_at = GREATEST(m.dequeue_at, @extschema@._clock_ms() + p_lock_ms),
        position = NULL
    WHERE
        m.id = p_id
        AND m.num_attempts = p_num_attempts
        AND m.is_locked
        AND COALESCE(m.locked_by = @extschema@._caller_role(), TRUE);
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_heartbeat(bigint, integer, bigint) IS
'Extend the lock of a locked message to at least now + p_lock_ms (never shortens it). Returns false for a stale token or a message that is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_heartbeat(bigint, integer, bigint) FROM PUBLIC;
