-- Internal: move a message, locked by the caller, to the dead letters with
-- p_error as the last entry of its attempt log (counted in
-- lonnymq_messages_dead_lettered_total), count it out of a max_size channel
-- (_channel_removed), and release its key for the channel's dedup window
-- (_message_key_release).  Admission is the caller's job (_channel_admit).
-- A message with dependents has them resolved as a dead parent's
-- (_message_release: its release row).
-- Callers: message_fail (its last failure), _message_promote (a lock that
-- expired on its last attempt) and _message_dependent_end (a waiting
-- message whose parent died).
-- Parameters: p_id, the message; p_channel_id, p_channel, its channel's id and
--   name (the dead letter's channel); p_error, the last error (NULL allowed);
--   p_now, the caller's clock (dead_at, the log entry's time, the start of the
--   key's window); p_window_ms, the channel's dedup_window_ms.
-- Returns: nothing.
-- Calls: _attempt_log_append (inlined), _message_key_release,
--   _channel_removed, _message_release (a message with dependents).
-- Tables: writes message (deletes it, by message_pkey; its release row),
--   dead_letter (inserts it), messages_dead_lettered_seq (the counter).  (message_key through
--   _message_key_release; channel through _channel_removed.)
-- Locks: the message row it deletes (the caller has locked it); through its
--   callees, the message_key row they update or delete and a max_size
--   channel's row (under the channel row lock, 1819111683, the caller holds).
CREATE FUNCTION @extschema@._message_bury(
    p_id bigint,
    p_channel_id bigint,
    p_channel text,
    p_error text,
    p_now bigint,
    p_window_ms bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_key text;
    v_has_dependents boolean;
    v_counted bigint;
BEGIN
    WITH gone AS (
        DELETE FROM @extschema@.message AS m
        WHERE m.id = p_id
        RETURNING m.*
    ),

    dead AS (
        INSERT INTO @extschema@.dead_letter (
            id, channel, key, content, state, num_attempts, created_at, dead_at, last_error, attempt_log, headers
        )
        SELECT
            g.id, p_channel, g.key, g.content, g.state, g.num_attempts, g.created_at, p_now, p_error,
            @extschema@._attempt_log_append(g.attempt_log, g.num_attempts, p_now, p_error), g.headers
        FROM gone AS g
        RETURNING 1
    )

    SELECT
        g.key, g.has_dependents,
        -- (Counted, lonnymq_messages_dead_lettered_total: a sequence, no row.)
        (SELECT pg_catalog.nextval('@extschema@.messages_dead_lettered_seq') FROM dead)
    INTO v_key, v_has_dependents, v_counted
    FROM gone AS g;
    IF v_key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(p_channel_id, v_key, p_id, p_window_ms, p_now);
    END IF;
    PERFORM @extschema@._channel_removed(ARRAY[p_channel_id]);
    IF v_has_dependents THEN
        PERFORM @extschema@._message_release(ARRAY[p_id], ARRAY[p_channel_id], ARRAY[p_channel], 'dead');
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_bury(bigint, bigint, text, text, bigint, bigint) IS
'Internal: move a locked message to the dead letters, logging its last error.';

REVOKE ALL ON FUNCTION @extschema@._message_bury(bigint, bigint, text, text, bigint, bigint) FROM PUBLIC;
