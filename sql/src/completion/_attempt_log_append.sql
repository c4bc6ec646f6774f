-- Internal: an attempt log with one more failed attempt appended: the
-- attempt's number, when it ended (epoch ms) and why.  Used by every writer of
-- message.attempt_log and dead_letter.attempt_log (a failure's retry,
-- _message_requeue; a lock that expired, message_complete_dequeue; a dead
-- letter, _message_bury).  A plain SQL expression, so that the planner inlines
-- it into the calling statement.
-- Parameters: p_log, the log so far (NULL: empty); p_attempt, the attempt's
--   number (the message's num_attempts); p_at, when it ended, epoch ms;
--   p_error, why (NULL allowed).
-- Returns: the log, a jsonb array, with {attempt, at, error} appended.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._attempt_log_append(
    p_log jsonb,
    p_attempt integer,
    p_at bigint,
    p_error text
)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT COALESCE(p_log, '[]'::jsonb) || pg_catalog.jsonb_build_array(
        pg_catalog.jsonb_build_object('attempt', p_attempt, 'at', p_at, 'error', p_error)
    )
$$;

COMMENT ON FUNCTION @extschema@._attempt_log_append(jsonb, integer, bigint, text) IS
'Internal: the attempt log with one failed attempt (number, time, error) appended.';

REVOKE ALL ON FUNCTION @extschema@._attempt_log_append(jsonb, integer, bigint, text) FROM PUBLIC;
