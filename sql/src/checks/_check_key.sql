-- Internal: validates a deduplication key (NULL means no key): 1 to 1024
-- characters, else 22023.
-- Parameters: p_key, the key, or NULL.
-- Returns: nothing; raises on an empty or over-long key.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_key(p_key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF pg_catalog.length(p_key) NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'lonnymq: a key must be 1 to 1024 characters, got %',
            pg_catalog.length(p_key)
            USING ERRCODE = '22023';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_key(text) IS
'Internal: raises 22023 for an empty or over-long deduplication key (NULL is no key).';

REVOKE ALL ON FUNCTION @extschema@._check_key(text) FROM PUBLIC;
