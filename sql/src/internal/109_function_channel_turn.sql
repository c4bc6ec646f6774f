-- Internal: the turn of a channel whose next_at goes from p_next_at_before
-- to p_next_at: a new one (the back of the rotation among the channels due
-- at the same time) when it moves, else p_turn.  A SQL function the
-- planner inlines into the UPDATE that moves the channel.
CREATE FUNCTION @extschema@._channel_turn(p_next_at_before bigint, p_next_at bigint, p_turn bigint)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
    SELECT CASE
        WHEN p_next_at IS DISTINCT FROM p_next_at_before
            THEN pg_catalog.nextval('@extschema@.channel_turn_seq')
        ELSE p_turn
    END
$$;

COMMENT ON FUNCTION @extschema@._channel_turn(bigint, bigint, bigint) IS
'Internal: a channel''s turn after its next_at moved from p_next_at_before to p_next_at: a new one when it moved.';

REVOKE ALL ON FUNCTION @extschema@._channel_turn(bigint, bigint, bigint) FROM PUBLIC;
