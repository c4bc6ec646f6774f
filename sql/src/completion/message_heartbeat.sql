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
DECLARE
    v_renewed record;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    PERFORM @extschema@._check_lock_ms(p_lock_ms);
    -- A writer of message_due_ix: the epoch first, then the clock.  A lock
    -- that had expired and was promoted (ready again) is taken back out of
    -- the round order: its holder keeps it.
    PERFORM @extschema@._epoch_enter();
    -- (Channel rows before message rows, as completions lock them: the row
    -- of the channel of a lock made ready again, which may be its pending
    -- delivery.)
    -- (The message by primary key only: a condition on its position let a
    -- plan made on an empty queue walk message_ready_ix.)
    PERFORM @extschema@._channel_row_lock(c.id)
    FROM @extschema@.channel AS c
    WHERE c.id = (
        SELECT CASE WHEN m.position IS NOT NULL AND m.is_admitted THEN m.channel_id END
        FROM @extschema@.message AS m
        WHERE m.id = p_id
    );
    WITH old AS (
        SELECT m.id, m.position IS NOT NULL AND m.is_admitted AS was_pending
        FROM @extschema@.message AS m
        WHERE
            m.id = p_id AND m.num_attempts = p_num_attempts AND m.is_locked
            AND COALESCE(m.locked_by = @extschema@._caller_role(), TRUE)
        FOR UPDATE
    )
    UPDATE @extschema@.message AS m
    SET dequeue_at = GREATEST(m.dequeue_at, @extschema@._clock_ms() + p_lock_ms), position = NULL
    FROM old AS o
    WHERE m.id = o.id
    RETURNING m.channel_id, o.was_pending INTO v_renewed;
    -- (Such a lock of a channel with a release interval was its pending
    -- delivery: the channel may admit another.)
    IF v_renewed.was_pending THEN
        PERFORM @extschema@._channel_admit(v_renewed.channel_id, 0, 1, FALSE, @extschema@._clock_ms(), NULL);
    END IF;
    RETURN v_renewed IS NOT NULL;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_heartbeat(bigint, integer, bigint) IS
'Extend the lock of a locked message to at least now + p_lock_ms (never shortens it). Returns false for a stale token or a message that is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_heartbeat(bigint, integer, bigint) FROM PUBLIC;
