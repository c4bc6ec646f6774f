-- Delete the history of messages completed more than p_older_than_ms ago (0:
-- all of it).  Returns how many rows were deleted.  Walks
-- message_history_completed_ix from its oldest entry (the entry points'
-- settings forbid a sequential scan): the cost is in proportion to the rows
-- deleted, however large the history.
-- Parameters: p_older_than_ms, the least age in ms of the history to delete (0
--   or more).
-- Returns: how many rows were deleted.  Errors: 22004 (NULL), 22023
--   (negative).
-- Calls: _clock_ms.
-- Tables: writes message_history (deletes, by message_history_completed_ix).
-- Locks: the history rows it deletes.
CREATE FUNCTION @extschema@.history_prune(p_older_than_ms bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count bigint;
    v_cutoff bigint;
BEGIN
    IF p_older_than_ms IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_older_than_ms must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_older_than_ms < 0 THEN
        RAISE EXCEPTION 'lonnymq: p_older_than_ms must be at least 0, got %', p_older_than_ms
            USING ERRCODE = '22023';
    END IF;
    -- Through message_history_completed_ix (the entry points' settings): the
    -- cost is in proportion to the rows deleted, however large the history.
    v_cutoff := @extschema@._clock_ms() - p_older_than_ms;
    DELETE FROM @extschema@.message_history AS h
    WHERE h.completed_at <= v_cutoff;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION @extschema@.history_prune(bigint) IS
'Delete message_history rows completed at least p_older_than_ms ago (0: all). Returns how many were deleted.';

REVOKE ALL ON FUNCTION @extschema@.history_prune(bigint) FROM PUBLIC;
