-- Internal: how far, in ms, a new message created with the default
-- dequeue_at (its transaction's start) may sort before its channel's last
-- ready message and still not be early (_message_place): a producer's
-- transaction that started a little before another's is not a priority
-- message, and placing it early would cost the take a resolution
-- (_message_turns_resolve).  A message given a dequeue_at, or coming back
-- (promoted, retried, admitted), has no margin.  A constant function: the
-- planner folds it into the plans that use it, once per session.
-- Parameters: none.
-- Returns: 1000, a bigint.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._early_margin_ms()
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 1000::bigint
$$;

COMMENT ON FUNCTION @extschema@._early_margin_ms() IS
'Internal: how far (ms) a message with the default dequeue_at may sort before its channel''s last ready one without being early.';

REVOKE ALL ON FUNCTION @extschema@._early_margin_ms() FROM PUBLIC;
