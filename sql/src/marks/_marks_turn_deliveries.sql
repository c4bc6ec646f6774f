-- Internal: how many messages delivered since the last raise
-- (messages_delivered_seq - marks_delivered_seq) give a dequeue the marks'
-- turn: 8.  Between two raises the front of the round order moves on by
-- about one round per message a channel's producer places behind another's
-- (or its own) ready message, and the position mark trails it by up to two
-- raises' worth (it cannot pass the bound the previous raise set): with 16,
-- 3 producers in overlapping transactions and 2 workers left it 64 rounds
-- or more behind the front in 3 of 102 runs of test_position_marks, and the
-- due mark lagged the clock enough that a held snapshot made a call read
-- 3.4x its buffers (bench/held_session.py, case c), against 2.8x-3.1x with
-- 8 (0.14.0: 2.9x-3.1x).  A raise costs a worker's call about 20 plan
-- nodes: 8 makes it 1.3 nodes a message more than 16
-- (bench/plan_counts.py).  A constant function: the planner folds it into
-- the plan that uses it.
-- Parameters: none.
-- Returns: 8, a bigint.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._marks_turn_deliveries()
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 8::bigint
$$;

COMMENT ON FUNCTION @extschema@._marks_turn_deliveries() IS
'Internal: how many deliveries since the last raise give a dequeue the marks'' turn (8).';

REVOKE ALL ON FUNCTION @extschema@._marks_turn_deliveries() FROM PUBLIC;
