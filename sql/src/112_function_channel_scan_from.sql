-- Internal: where a walk of a channel's messages starts, in dequeue_at: its
-- floor_at (no message sorts below it), or the beginning while the channel
-- has a floor mark (a message was put below the floor; the next raise, see
-- _channel_place, takes it into account and deletes the mark) or no floor.
-- STABLE, so that a scan can use it as an index bound.  PL/pgSQL, not SQL:
-- a SQL function with a sub-select is not inlined, and is parsed and planned
-- again in every transaction that calls it (55 of 221 us of a one-message
-- dequeue, measured); PL/pgSQL keeps the plan for the session.
CREATE FUNCTION @extschema@._channel_scan_from(p_channel @extschema@.channel)
RETURNS bigint
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    RETURN CASE
        WHEN EXISTS (
            SELECT 1
            FROM @extschema@.channel_floor_mark AS k
            WHERE k.channel_id = p_channel.id
        ) THEN -9223372036854775808
        ELSE COALESCE(p_channel.floor_at, -9223372036854775808)
    END;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_scan_from(@extschema@.channel) IS
'Internal: the dequeue_at from which a channel''s messages are walked: its floor, or the beginning while it has a floor mark.';

REVOKE ALL ON FUNCTION @extschema@._channel_scan_from(@extschema@.channel) FROM PUBLIC;
