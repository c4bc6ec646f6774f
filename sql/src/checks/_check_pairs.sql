-- Internal: raises the documented error for (id, token) arrays that are
-- not valid input of the settle-by-batch calls: 22004 for a NULL array or
-- element, 22023 for arrays of different lengths, of more than one
-- dimension, or of more than 10000 elements; nothing for valid ones.
-- Called only when a cheap test of the caller's (_message_complete_set)
-- has found something wrong (or nothing to do: empty arrays).
-- Parameters: p_ids, the message ids; p_num_attempts, their fencing tokens.
-- Returns: nothing; raises on invalid arrays.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_pairs(p_ids bigint[], p_num_attempts integer[])
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_ids IS NULL OR p_num_attempts IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_ids and p_num_attempts must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.cardinality(p_ids) <> pg_catalog.cardinality(p_num_attempts) THEN
        RAISE EXCEPTION 'lonnymq: p_ids has % elements but p_num_attempts has %',
            pg_catalog.cardinality(p_ids), pg_catalog.cardinality(p_num_attempts)
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_ndims(p_ids) > 1 OR pg_catalog.array_ndims(p_num_attempts) > 1 THEN
        RAISE EXCEPTION 'lonnymq: p_ids and p_num_attempts must be one-dimensional arrays'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'lonnymq: a batch holds at most 10000 messages, got %', pg_catalog.cardinality(p_ids)
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_ids, NULL) IS NOT NULL OR pg_catalog.array_position(p_num_attempts, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'lonnymq: p_ids and p_num_attempts must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_pairs(bigint[], integer[]) IS
'Internal: raise the documented error for invalid (id, token) arrays.';

REVOKE ALL ON FUNCTION @extschema@._check_pairs(bigint[], integer[]) FROM PUBLIC;
