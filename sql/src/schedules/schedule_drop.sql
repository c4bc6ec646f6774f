-- Drop a periodic message, and its pending occurrence.  Messages it already
-- created stay (one whose promotion is in flight too: the delete of the
-- schedule waits for it, and then drops the occurrence it created).
-- Returns false when there is no such schedule.
-- Parameters: p_name, the schedule's name.
-- Returns: whether a schedule was dropped.  Errors: 22004 (NULL name).
-- Calls: none.
-- Tables: writes schedule (deletes the named row, by schedule_name_ix),
--   message (deletes its occurrence, by message_pkey).
-- Locks: the schedule's row, deleted (waits for a dequeue or tick()
--   promoting its occurrence), then the occurrence's row, deleted (waits
--   for a promotion that found the schedule's row busy).
CREATE FUNCTION @extschema@.schedule_drop(p_name text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_occurrence bigint;
BEGIN
    IF p_name IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_name must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    DELETE FROM @extschema@.schedule AS s WHERE s.name = p_name RETURNING s.occurrence_id INTO v_occurrence;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    DELETE FROM @extschema@.message AS m WHERE m.id = v_occurrence AND m.schedule = p_name;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.schedule_drop(text) IS
'Drop a periodic message (messages already created stay). Returns false when there is no such schedule.';

REVOKE ALL ON FUNCTION @extschema@.schedule_drop(text) FROM PUBLIC;
