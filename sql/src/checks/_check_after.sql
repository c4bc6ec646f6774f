-- Internal: raise the documented error for an invalid list of parents or
-- mode, else nothing: p_after must be a one-dimensional array without NULL
-- (22004), of at most 10,000 ids, each one that message_id_seq has given
-- (22023: an id never given can name no message, past or future, and a
-- typo must not wait for ever), none a schedule's pending occurrence (not a
-- message yet: 22023; an id that is a message now never becomes one); and
-- p_after_mode NULL, 'completed' or 'ended' (22023).  Called before a create
-- draws its ids, so that a refused call changes nothing, message_id_seq
-- included.
-- Parameters: p_after, the ids; p_after_mode, the mode.
-- Returns: nothing.
-- Calls: none.
-- Tables: reads message_id_seq (its last value), message (message_pkey: the
--   ids that are rows, for a pending occurrence).
-- Locks: none.
CREATE FUNCTION @extschema@._check_after(p_after bigint[], p_after_mode text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_bad bigint;
BEGIN
    IF p_after_mode IS NOT NULL AND p_after_mode NOT IN ('completed', 'ended') THEN
        RAISE EXCEPTION 'lonnymq: p_after_mode must be ''completed'' or ''ended'', got "%"', p_after_mode
            USING ERRCODE = '22023';
    END IF;
    IF p_after IS NULL THEN
        RETURN;
    END IF;
    IF pg_catalog.array_ndims(p_after) > 1 THEN
        RAISE EXCEPTION 'lonnymq: p_after must be a one-dimensional array'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.cardinality(p_after) > 10000 THEN
        RAISE EXCEPTION 'lonnymq: a message waits for at most 10000 others, got %', pg_catalog.cardinality(p_after)
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_after, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'lonnymq: p_after must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    SELECT a.id INTO v_bad
    FROM pg_catalog.unnest(p_after) AS a (id)
    WHERE a.id < 1 OR a.id > COALESCE(pg_catalog.pg_sequence_last_value('@extschema@.message_id_seq'), 0)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'lonnymq: p_after names %, which is no message id (none was ever given)', v_bad
            USING ERRCODE = '22023';
    END IF;
    SELECT pg_catalog.min(m.id) INTO v_bad
    FROM @extschema@.message AS m
    WHERE m.id = ANY(p_after) AND m.schedule <> '';
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'lonnymq: p_after names %, a schedule''s pending occurrence, not a message yet', v_bad
            USING ERRCODE = '22023';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_after(bigint[], text) IS
'Internal: raises 22004 or 22023 for an invalid p_after (NULL elements, more than 10000, an id never given) or p_after_mode.';

REVOKE ALL ON FUNCTION @extschema@._check_after(bigint[], text) FROM PUBLIC;
