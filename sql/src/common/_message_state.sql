-- Internal: the name of a message's state, from the columns that hold it
-- (schema/message.sql lists the states and the CHECK constraints that
-- forbid the other combinations): 'held' (is_held: waiting for its limited
-- or paused channel's room, perhaps still locked by an expired lock's
-- holder), 'placed' (a position in the round order, perhaps still locked:
-- an expired lock placed again), 'locked' (is_locked, no position: its
-- dequeue_at is the lock's expiry), 'scheduled' (none of these: its
-- dequeue_at is when a promotion places or holds it).  "Ready" is the
-- user's word, what channel_stats counts: not locked and due, so placed,
-- held, or scheduled with its time come (doc/dequeue-design.md, "Words").  The one place the combinations are
-- named, for the tests and for a reader of the table (SELECT
-- lonnymq._message_state(m) FROM lonnymq.message AS m); the calls test the
-- columns their indexes are made of.
-- Parameters: p_message, a row of message.
-- Returns: 'held', 'placed', 'locked' or 'scheduled'.
-- Calls: none.
-- Tables: none (the row is the argument).
-- Locks: none.
CREATE FUNCTION @extschema@._message_state(p_message @extschema@.message)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE
        WHEN (p_message).is_held THEN 'held'
        WHEN (p_message).position IS NOT NULL THEN 'placed'
        WHEN (p_message).is_locked THEN 'locked'
        ELSE 'scheduled'
    END
$$;

COMMENT ON FUNCTION @extschema@._message_state(@extschema@.message) IS
'Internal: the name of a message''s state: held, placed, locked or scheduled (see the table message).';

REVOKE ALL ON FUNCTION @extschema@._message_state(@extschema@.message) FROM PUBLIC;
