-- Internal: validates one message's content and key (message_create,
-- message_publish): a content not NULL and within the size limit, a key
-- NULL or 1 to 1024 characters.
-- Parameters: p_content, the content; p_key, the deduplication key or NULL.
-- Returns: nothing; raises 22004, 54000 or 22023 on invalid input.
-- Calls: _check_size, _max_content_bytes, _check_key.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_message(p_content bytea, p_key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_content IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_content must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    PERFORM @extschema@._check_size('p_content', pg_catalog.octet_length(p_content), @extschema@._max_content_bytes());
    PERFORM @extschema@._check_key(p_key);
END;
$$;

COMMENT ON FUNCTION @extschema@._check_message(bytea, text) IS
'Internal: raises 22004 for a NULL content, 54000 for an over-large one, 22023 for an empty or over-long key.';

REVOKE ALL ON FUNCTION @extschema@._check_message(bytea, text) FROM PUBLIC;
