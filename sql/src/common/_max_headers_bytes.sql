-- Internal: the largest headers object a message may carry, in bytes of its
-- JSON text (64 KiB): room for W3C trace context (traceparent 55 bytes,
-- tracestate at most 512) and baggage (at most 8,192 by its W3C
-- specification) with the producer's own metadata beside them, and small
-- beside a content's 16 MiB: headers are read with every delivery.  A
-- constant function: the planner folds it into the plans of the functions
-- that test against it, once per session.
-- Parameters: none.
-- Returns: 65536.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._max_headers_bytes()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 65536
$$;

COMMENT ON FUNCTION @extschema@._max_headers_bytes() IS
'Internal: the largest headers object a message may carry, in bytes of its JSON text (64 KiB).';

REVOKE ALL ON FUNCTION @extschema@._max_headers_bytes() FROM PUBLIC;
