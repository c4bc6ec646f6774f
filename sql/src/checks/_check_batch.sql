-- Internal: validates the arrays of a batch of messages (message_create_batch,
-- message_publish_batch) and returns how many messages it holds: contents
-- not NULL, one-dimensional arrays of one length, at most 10000 messages,
-- no NULL content, every content within the size limit, every key 1 to
-- 1024 characters, every headers element a JSON object within its size
-- (_check_headers).  p_dequeue_at, p_keys and p_headers may be NULL (no
-- times, no keys, no headers: the tests on them pass), and so may an
-- element of any (that message's default time, no key, no headers).  An
-- empty batch returns 0 before the limits are tested.  The keys are tested as one query: octet_length
-- first, which reads only the header, then length() for the keys whose
-- bytes are out of range; the smallest bad key, if any, goes to _check_key
-- for its error.
-- Parameters: p_contents, the contents; p_dequeue_at, the epoch-ms times
--   or NULL; p_keys, the deduplication keys or NULL; p_headers, each
--   message's headers or NULL.
-- Returns: the number of messages (cardinality of p_contents).
-- Calls: _check_size, _max_content_bytes, _check_key, _check_headers,
--   _max_headers_bytes.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._check_batch(p_contents bytea[], p_dequeue_at bigint[], p_keys text[], p_headers jsonb[])
RETURNS integer
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_n integer;
    v_largest bigint;
    v_key text;
    v_bad integer;
BEGIN
    IF p_contents IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_contents must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    v_n := pg_catalog.cardinality(p_contents);
    IF pg_catalog.array_ndims(p_contents) <> 1
        OR pg_catalog.array_ndims(p_dequeue_at) <> 1
        OR pg_catalog.array_ndims(p_keys) <> 1
        OR pg_catalog.array_ndims(p_headers) <> 1 THEN
        RAISE EXCEPTION 'lonnymq: p_contents, p_dequeue_at, p_keys and p_headers must be one-dimensional arrays'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.cardinality(p_dequeue_at) <> v_n OR pg_catalog.cardinality(p_keys) <> v_n
        OR pg_catalog.cardinality(p_headers) <> v_n THEN
        RAISE EXCEPTION
            'lonnymq: p_dequeue_at, p_keys and p_headers must have as many elements as p_contents (%), got %, % and %',
            v_n, pg_catalog.cardinality(p_dequeue_at), pg_catalog.cardinality(p_keys), pg_catalog.cardinality(p_headers)
            USING ERRCODE = '22023';
    END IF;
    IF v_n = 0 THEN
        RETURN 0;
    END IF;
    IF v_n > 10000 THEN
        RAISE EXCEPTION 'lonnymq: a batch holds at most 10000 messages, got %', v_n
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_contents, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'lonnymq: p_contents[%] is NULL', pg_catalog.array_position(p_contents, NULL)
            USING ERRCODE = '22004';
    END IF;
    SELECT pg_catalog.max(pg_catalog.octet_length(c.content)) INTO v_largest
    FROM pg_catalog.unnest(p_contents) AS c (content);
    PERFORM @extschema@._check_size('a content', v_largest, @extschema@._max_content_bytes());
    IF p_keys IS NOT NULL THEN
        SELECT pg_catalog.min(k.key) INTO v_key
        FROM pg_catalog.unnest(p_keys) AS k (key)
        -- octet_length first: it reads the header, length() every byte.
        WHERE pg_catalog.octet_length(k.key) NOT BETWEEN 1 AND 1024 AND pg_catalog.length(k.key) NOT BETWEEN 1 AND 1024;
        PERFORM @extschema@._check_key(v_key);
    END IF;
    IF p_headers IS NOT NULL THEN
        -- The first bad element, if any, goes to _check_headers for its
        -- error.
        SELECT pg_catalog.min(h.i) INTO v_bad
        FROM ROWS FROM (pg_catalog.unnest(p_headers)) WITH ORDINALITY AS h (headers, i)
        WHERE
            pg_catalog.jsonb_typeof(h.headers) <> 'object'
            OR pg_catalog.octet_length(h.headers::text) > @extschema@._max_headers_bytes();
        IF v_bad IS NOT NULL THEN
            PERFORM @extschema@._check_headers(
                p_headers[pg_catalog.array_lower(p_headers, 1) + v_bad - 1], pg_catalog.format('p_headers[%s]', v_bad)
            );
        END IF;
    END IF;
    RETURN v_n;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_batch(bytea[], bigint[], text[], jsonb[]) IS
'Internal: validates a batch''s arrays (22004, 22023, 54000) and returns its number of messages.';

REVOKE ALL ON FUNCTION @extschema@._check_batch(bytea[], bigint[], text[], jsonb[]) FROM PUBLIC;
