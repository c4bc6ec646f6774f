-- Internal: validates a lock duration argument (message_heartbeat, and
-- message_complete_dequeue when its own inline test fails): not NULL
-- (22004), 1 to _max_duration_ms() (22023).
-- Parameters: p_lock_ms, the lock duration in milliseconds.
-- Returns: nothing; raises on an invalid duration.
-- Calls: _max_duration_ms.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_lock_ms(p_lock_ms bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_lock_ms IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_lock_ms must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_lock_ms NOT BETWEEN 1 AND @extschema@._max_duration_ms() THEN
        RAISE EXCEPTION 'lonnymq: p_lock_ms must be between 1 and % (365 days), got %',
            @extschema@._max_duration_ms(), p_lock_ms
            USING ERRCODE = '22023';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_lock_ms(bigint) IS
'Internal: raises 22004 for a NULL lock duration, 22023 outside 1 .. _max_duration_ms().';

REVOKE ALL ON FUNCTION @extschema@._check_lock_ms(bigint) FROM PUBLIC;
