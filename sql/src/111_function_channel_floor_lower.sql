-- Internal: called by whoever puts a message in a channel at p_at (its
-- dequeue_at), holding the channel guard shared.  A message below the
-- channel's floor lowers it (a lowering row of channel_floor), so that
-- dequeues walk the channel from it.
--
-- A raise (_channel_place) never sets the floor above its clock less 20 ms,
-- and it holds the guard exclusively until it commits; the clock read here,
-- after the guard,
-- is later than the raiser's: a message dated at most 20 ms before it is
-- above every floor, in any isolation level, and costs no read (the common
-- case: a producer's dequeue_at is its transaction's start).  Otherwise the
-- floor is read; under REPEATABLE READ or SERIALIZABLE that read may predate
-- a raise, so the lowering row is written whatever it said.
CREATE FUNCTION @extschema@._channel_floor_lower(
    p_channel_id bigint,
    p_at bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    IF p_at >= @extschema@._clock_ms() - 20
        OR pg_catalog.current_setting('transaction_isolation') = 'read committed'
        AND p_at >= @extschema@._channel_scan_from(p_channel_id) THEN
        RETURN;
    END IF;
    INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
    VALUES (p_channel_id, p_at, FALSE);
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_floor_lower(bigint, bigint) IS
'Internal: lower a channel''s floor to p_at when a message put there may lie below it.';

REVOKE ALL ON FUNCTION @extschema@._channel_floor_lower(bigint, bigint) FROM PUBLIC;
