-- Internal: refuses a message's headers that are not a JSON object, or whose
-- JSON text is longer than _max_headers_bytes (both 22023: the headers are
-- an argument of the wrong form, not a payload).  NULL passes: no headers.
-- Parameters: p_headers, the headers or NULL; p_name, how the error names
--   them (p_headers, or p_headers[i] for a batch's element).
-- Returns: nothing; raises 22023 on invalid headers.
-- Calls: _max_headers_bytes.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_headers(p_headers jsonb, p_name text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_bytes integer;
BEGIN
    IF pg_catalog.jsonb_typeof(p_headers) <> 'object' THEN
        RAISE EXCEPTION 'lonnymq: % must be a JSON object, got a JSON %', p_name, pg_catalog.jsonb_typeof(p_headers)
            USING ERRCODE = '22023';
    END IF;
    v_bytes := pg_catalog.octet_length(p_headers::text);
    IF v_bytes > @extschema@._max_headers_bytes() THEN
        RAISE EXCEPTION 'lonnymq: % is % bytes of JSON, the limit is % (64 KiB)', p_name, v_bytes,
            @extschema@._max_headers_bytes()
            USING ERRCODE = '22023';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_headers(jsonb, text) IS
'Internal: raises 22023 for headers that are not a JSON object or are over 64 KiB of JSON text.';

REVOKE ALL ON FUNCTION @extschema@._check_headers(jsonb, text) FROM PUBLIC;
