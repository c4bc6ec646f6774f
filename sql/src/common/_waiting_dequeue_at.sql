-- Internal: the dequeue_at of a message that waits for its parents: 2^62 ms
-- plus its own dequeue_at (held between -2^61 and 2^61, 73 million years
-- either way), past any clock: its key in message_due_ix lies beyond every
-- probe's range, so no promotion, raise or take reaches it while it waits,
-- and no index, predicate or column of the worker loop changes for it
-- (doc/workflows-design.md, sections 3 and 5).  Its last parent's end
-- gives it back its own, dequeue_at - _waiting_dequeue_at(0), or the clock
-- if later (_message_waits_count_down).  A constant function: inlined and
-- folded into the plans that use it.
-- Parameters: p_own, the message's own dequeue_at.
-- Returns: 2^62 + p_own, p_own held between -2^61 and 2^61.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._waiting_dequeue_at(p_own bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 4611686018427387904::bigint + LEAST(GREATEST(p_own, -2305843009213693952), 2305843009213693952)
$$;

COMMENT ON FUNCTION @extschema@._waiting_dequeue_at(bigint) IS
'Internal: the dequeue_at of a message waiting for its parents: 2^62 plus its own (held within 2^61 either way), past any clock.';

REVOKE ALL ON FUNCTION @extschema@._waiting_dequeue_at(bigint) FROM PUBLIC;
