-- Internal: validates the (id, fencing token) pair of the calls that settle
-- one delivery (message_complete, message_defer, message_fail,
-- message_heartbeat; message_complete calls it only when one is NULL):
-- neither may be NULL (22004).
-- Parameters: p_id, the message id; p_num_attempts, its fencing token.
-- Returns: nothing; raises 22004 when either is NULL.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_token(p_id bigint, p_num_attempts integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_id IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_id must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_num_attempts IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_num_attempts must not be NULL'
            USING ERRCODE = '22004';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_token(bigint, integer) IS
'Internal: raises 22004 when the message id or fencing token is NULL.';

REVOKE ALL ON FUNCTION @extschema@._check_token(bigint, integer) FROM PUBLIC;
