-- Internal: the positions in one round of the round order, 2^20: a position
-- is round * 2^20 + slot, and a channel's slot is the low 20 bits of its id
-- (doc/dequeue-design.md, "Words").  A constant function: the planner folds
-- it into the plans that use it, once per session.
-- Parameters: none.
-- Returns: 1048576, a bigint.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._round_size()
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 1048576::bigint
$$;

COMMENT ON FUNCTION @extschema@._round_size() IS
'Internal: the positions in one round of the round order (2^20; a channel''s slot is the low 20 bits of its id).';

REVOKE ALL ON FUNCTION @extschema@._round_size() FROM PUBLIC;
