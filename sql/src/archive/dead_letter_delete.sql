-- Delete dead letters for good: those of p_channel, or with an id in p_ids, or
-- both filters; deleting every dead letter needs p_all => true (so that a call
-- with a NULL argument by mistake deletes nothing).  Returns how many were
-- deleted.  Dead letters a concurrent redrive or delete holds are skipped.
-- Their keys' claims are left to expire.
-- Parameters: p_channel, only this channel's dead letters (NULL: any channel);
--   p_ids, only these ids (NULL: any); p_all, needed (true) when both are
--   NULL.
-- Returns: how many were deleted.  Errors: 22004 when nothing is chosen;
--   _check_channel_name's for a bad p_channel.
-- Calls: _check_channel_name.
-- Tables: reads dead_letter (dead_letter_pkey for p_ids,
--   dead_letter_channel_ix for a channel); writes dead_letter (deletes).
-- Locks: the chosen dead letters FOR UPDATE SKIP LOCKED (never waits), then
--   deleted.
CREATE FUNCTION @extschema@.dead_letter_delete(
    p_channel text DEFAULT NULL,
    p_ids bigint[] DEFAULT NULL,
    p_all boolean DEFAULT FALSE
)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    IF p_channel IS NOT NULL THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    IF p_channel IS NULL AND p_ids IS NULL AND NOT COALESCE(p_all, FALSE) THEN
        RAISE EXCEPTION 'lonnymq: give p_channel or p_ids, or p_all => true to delete every dead letter'
            USING ERRCODE = '22004';
    END IF;
    IF p_ids IS NOT NULL THEN
        DELETE FROM @extschema@.dead_letter AS d
        WHERE d.id = ANY(p_ids) AND d.id IN (
            SELECT x.id
            FROM @extschema@.dead_letter AS x
            WHERE x.id = ANY(p_ids) AND (p_channel IS NULL OR x.channel = p_channel)
            FOR UPDATE SKIP LOCKED
        );
    ELSIF p_channel IS NOT NULL THEN
        DELETE FROM @extschema@.dead_letter AS d
        WHERE d.channel = p_channel AND d.id IN (
            SELECT x.id
            FROM @extschema@.dead_letter AS x
            WHERE x.channel = p_channel
            FOR UPDATE SKIP LOCKED
        );
    ELSE
        DELETE FROM @extschema@.dead_letter AS d
        WHERE d.id IN (
            SELECT x.id
            FROM @extschema@.dead_letter AS x
            FOR UPDATE SKIP LOCKED
        );
    END IF;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION @extschema@.dead_letter_delete(text, bigint[], boolean) IS
'Delete dead letters for good: those of p_channel and/or with an id in p_ids, or all of them with p_all => true. Returns how many.';

REVOKE ALL ON FUNCTION @extschema@.dead_letter_delete(text, bigint[], boolean) FROM PUBLIC;
