-- One message's status by its id, so that a caller can follow a message, or
-- a workflow of them, through the queue, the dead letters and the history:
--   waiting    created with p_after, some of its parents still to end
--              (dequeue_at: its own, which it keeps once released);
--   scheduled  not locked, its dequeue_at ahead (a future time, a defer, a
--              retry's backoff);
--   ready      not locked and due: placed, held by its channel's limit, or
--              waiting for a dequeue's promotion;
--   locked     held by a worker, until it is settled or, once expired,
--              recovered (channel_stats counts these locked too);
--   dead       in dead_letter (ended_at: dead_at);
--   done       completed and kept in message_history (its channel keeps
--              history; ended_at: completed_at);
--   gone       none of these: completed without history, cancelled, its
--              history pruned, or an id whose transaction rolled back.
-- The statuses are channel_stats' counts, message by message.  "Now" is the
-- wall clock, read once.  Cost: three primary-key probes, and a fourth
-- (message_wait_pkey) for a message whose dequeue_at is past any clock.
-- Parameters: p_id, a message id, as message_create returned it.
-- Returns: one row: id, channel (NULL when gone), status, dequeue_at,
--   num_attempts, created_at (NULL when gone), ended_at (dead or done).
-- Calls: _clock_ms, _waiting_dequeue_at (a constant).
-- Tables: reads message (message_pkey), message_wait (message_wait_pkey:
--   waiting), dead_letter (dead_letter_pkey), message_history
--   (message_history_pkey), message_id_seq (its last value).
-- Locks: none.
CREATE FUNCTION @extschema@.message_status(p_id bigint)
RETURNS TABLE (
    id bigint,
    channel text,
    status text,
    dequeue_at bigint,
    num_attempts integer,
    created_at bigint,
    ended_at bigint
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint := @extschema@._clock_ms();
BEGIN
    IF p_id IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_id must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    -- (An id is in at most one of the three: a message leaves the queue for
    -- the dead letters or the history in the statement that deletes it.)
    RETURN QUERY
    SELECT
        m.id, m.channel,
        CASE WHEN w.is_waiting THEN 'waiting' WHEN m.is_locked THEN 'locked' WHEN m.dequeue_at <= v_now THEN 'ready' ELSE 'scheduled' END,
        CASE WHEN w.is_waiting THEN m.dequeue_at - @extschema@._waiting_dequeue_at(0) ELSE m.dequeue_at END,
        m.num_attempts, m.created_at, NULL::bigint
    FROM @extschema@.message AS m
    -- (Waiting: its own count, looked for only past any clock.)
    CROSS JOIN LATERAL (
        SELECT m.dequeue_at >= @extschema@._waiting_dequeue_at(-2305843009213693952) AND EXISTS (
            SELECT 1 FROM @extschema@.message_wait AS x WHERE x.child_id = m.id AND x.bucket = -1
        ) AS is_waiting
    ) AS w
    -- (A wake or a release row, schedule '', is no message.)
    WHERE m.id = p_id AND m.schedule IS DISTINCT FROM ''
    UNION ALL
    SELECT d.id, d.channel, 'dead', NULL::bigint, d.num_attempts, d.created_at, d.dead_at
    FROM @extschema@.dead_letter AS d
    WHERE d.id = p_id
    UNION ALL
    SELECT h.id, h.channel, 'done', NULL::bigint, h.num_attempts, h.created_at, h.completed_at
    FROM @extschema@.message_history AS h
    WHERE h.id = p_id;
    IF FOUND THEN
        RETURN;
    END IF;
    IF p_id > COALESCE(pg_catalog.pg_sequence_last_value('@extschema@.message_id_seq'), 0) OR p_id < 1 THEN
        RAISE EXCEPTION 'lonnymq: % is not a message id lonnymq gave (the last is %)',
            p_id, COALESCE(pg_catalog.pg_sequence_last_value('@extschema@.message_id_seq'), 0)
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY SELECT p_id, NULL::text, 'gone', NULL::bigint, NULL::integer, NULL::bigint, NULL::bigint;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_status(bigint) IS
'One message''s status by id: waiting (for its parents), scheduled, ready, locked, dead (a dead letter), done (in the history) or gone (completed without history, cancelled); 22023 for an id lonnymq never gave.';

REVOKE ALL ON FUNCTION @extschema@.message_status(bigint) FROM PUBLIC;
