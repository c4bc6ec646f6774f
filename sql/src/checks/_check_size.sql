-- Internal: refuses a value of p_bytes bytes given as p_name when it is
-- over p_limit bytes (54000), with one wording for every such limit
-- (contents and states 16 MiB, errors 1 MiB).
-- Parameters: p_name, how the message names the value; p_bytes, its size;
--   p_limit, the largest size allowed, in bytes.
-- Returns: nothing; raises 54000 when p_bytes > p_limit.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_size(p_name text, p_bytes bigint, p_limit bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_bytes > p_limit THEN
        RAISE EXCEPTION 'lonnymq: % is % bytes, the limit is % (% MiB)', p_name, p_bytes, p_limit, p_limit / 1048576
            USING ERRCODE = '54000';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_size(text, bigint, bigint) IS
'Internal: raises 54000 when a value is larger than its limit.';

REVOKE ALL ON FUNCTION @extschema@._check_size(text, bigint, bigint) FROM PUBLIC;
