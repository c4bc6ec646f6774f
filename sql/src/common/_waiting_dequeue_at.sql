-- Internal: the dequeue_at of a message that waits for its parents (2^62 ms,
-- past any clock): its key in message_due_ix lies beyond every probe's
-- range, so no promotion, raise or take reaches it while it waits, and no
-- index or predicate of the worker loop changes for it (doc/
-- workflows-design.md, section 3).  Its own time waits in
-- waiting_dequeue_at.  A constant function: folded into the plans that use
-- it.
-- Parameters: none.
-- Returns: 4611686018427387904.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._waiting_dequeue_at()
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 4611686018427387904::bigint
$$;

COMMENT ON FUNCTION @extschema@._waiting_dequeue_at() IS
'Internal: the dequeue_at of a message waiting for its parents (2^62 ms, past any clock).';

REVOKE ALL ON FUNCTION @extschema@._waiting_dequeue_at() FROM PUBLIC;
