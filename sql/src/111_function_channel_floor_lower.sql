-- Internal: called by whoever puts a message in a channel at p_at (its
-- dequeue_at), holding the channel guard shared.  A message below the
-- channel's floor lowers it (a lowering row of channel_floor), so that
-- dequeues walk the channel from it.
--
-- In READ COMMITTED the floor is read as committed now: the guard is held,
-- so no raise is in flight, and a later one sees this message.  Under
-- REPEATABLE READ or SERIALIZABLE the snapshot may predate a raise: the
-- clock decides instead.  A raise never sets the floor above its clock less
-- 20 ms and holds the guard exclusively until it commits, so the clock read
-- here, after the guard, is later than the raiser's: a message dated at
-- most 20 ms before it is above every floor, unless the server's clock
-- stepped back meanwhile (hence not in READ COMMITTED, where the read is
-- exact).  Older messages lower the floor whatever it was.
CREATE FUNCTION @extschema@._channel_floor_lower(
    p_channel_id bigint,
    p_at bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        IF p_at >= @extschema@._channel_scan_from(p_channel_id) THEN
            RETURN;
        END IF;
    ELSIF p_at >= @extschema@._clock_ms() - 20 THEN
        RETURN;
    END IF;
    INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
    VALUES (p_channel_id, p_at, FALSE);
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_floor_lower(bigint, bigint) IS
'Internal: lower a channel''s floor to p_at when a message put there may lie below it.';

REVOKE ALL ON FUNCTION @extschema@._channel_floor_lower(bigint, bigint) FROM PUBLIC;
