-- Internal: lock up to p_limit deliverable messages of one channel in
-- (dequeue_at, id) order, skipping rows other transactions hold, with one
-- index range scan.  p_expired_only: only expired locks (for a channel at its
-- max_concurrency), found through message_locked_ix so that a ready backlog
-- is never walked.  Returns each message as it was before the lock, with
-- was_locked = an expired lock recovered.
CREATE FUNCTION @extschema@._message_take(
    p_channel_id bigint,
    p_now bigint,
    p_lock_ms bigint,
    p_limit integer,
    p_expired_only boolean
)
RETURNS TABLE (
    id bigint,
    content bytea,
    state bytea,
    num_attempts integer,
    dequeue_at bigint,
    was_locked boolean
)
LANGUAGE plpgsql
VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_message record;
BEGIN
    -- Rows are locked one by one as the cursor reaches them, then each is
    -- updated through its primary key.  (A single UPDATE ... FROM the locked
    -- rows would be planned, generically, for "LIMIT p_limit" rows of the
    -- whole channel, and can then choose a merge join that walks the
    -- message primary key from its start.)
    IF p_expired_only THEN
        FOR v_message IN
            SELECT m.id, m.dequeue_at, m.is_locked
            FROM @extschema@.message AS m
            WHERE
                m.channel_id = p_channel_id
                AND m.is_locked
                AND m.dequeue_at <= p_now
            ORDER BY m.dequeue_at, m.id
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED
        LOOP
            RETURN QUERY
            UPDATE @extschema@.message AS m
            SET
                dequeue_at = p_now + p_lock_ms,
                is_locked = TRUE,
                num_attempts = m.num_attempts + 1
            WHERE m.id = v_message.id
            RETURNING m.id, m.content, m.state, m.num_attempts, v_message.dequeue_at, v_message.is_locked;
        END LOOP;
    ELSE
        FOR v_message IN
            SELECT m.id, m.dequeue_at, m.is_locked
            FROM @extschema@.message AS m
            WHERE m.channel_id = p_channel_id AND m.dequeue_at <= p_now
            ORDER BY m.dequeue_at, m.id
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED
        LOOP
            RETURN QUERY
            UPDATE @extschema@.message AS m
            SET
                dequeue_at = p_now + p_lock_ms,
                is_locked = TRUE,
                num_attempts = m.num_attempts + 1
            WHERE m.id = v_message.id
            RETURNING m.id, m.content, m.state, m.num_attempts, v_message.dequeue_at, v_message.is_locked;
        END LOOP;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_take(bigint, bigint, bigint, integer, boolean) IS
'Internal: lock up to p_limit deliverable messages of a channel with one index range scan, SKIP LOCKED.';

REVOKE ALL ON FUNCTION @extschema@._message_take(bigint, bigint, bigint, integer, boolean) FROM PUBLIC;
