-- Internal: where a walk of a channel's messages starts, in dequeue_at: its
-- floor_at (no message sorts below it), or the beginning while the channel
-- has a floor mark (a message was put below the floor; the next raise, see
-- _channel_place, takes it into account and deletes the mark) or no floor.
-- STABLE, so that a scan can use it as an index bound.
CREATE FUNCTION @extschema@._channel_scan_from(p_channel @extschema@.channel)
RETURNS bigint
LANGUAGE sql
STABLE
AS $$
    SELECT CASE
        WHEN EXISTS (
            SELECT 1
            FROM @extschema@.channel_floor_mark AS k
            WHERE k.channel_id = p_channel.id
        ) THEN -9223372036854775808
        ELSE COALESCE(p_channel.floor_at, -9223372036854775808)
    END
$$;

COMMENT ON FUNCTION @extschema@._channel_scan_from(@extschema@.channel) IS
'Internal: the dequeue_at from which a channel''s messages are walked: its floor, or the beginning while it has a floor mark.';

REVOKE ALL ON FUNCTION @extschema@._channel_scan_from(@extschema@.channel) FROM PUBLIC;
