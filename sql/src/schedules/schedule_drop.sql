-- Drop a periodic message.  Messages it already created stay.  Returns false
-- when there is no such schedule.
-- Parameters: p_name, the schedule's name.
-- Returns: whether a schedule was dropped.  Errors: 22004 (NULL name).
-- Calls: none.
-- Tables: writes schedule (deletes the named row, by schedule_name_ix).
-- Locks: the schedule's row, deleted (waits for a dequeue or tick()
--   materialising it).
CREATE FUNCTION @extschema@.schedule_drop(p_name text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_name IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_name must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    DELETE FROM @extschema@.schedule AS s WHERE s.name = p_name;
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION @extschema@.schedule_drop(text) IS
'Drop a periodic message (messages already created stay). Returns false when there is no such schedule.';

REVOKE ALL ON FUNCTION @extschema@.schedule_drop(text) FROM PUBLIC;
