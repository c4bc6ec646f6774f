-- Internal: a message was put in a channel (created, deferred, retried after
-- a failure, redriven) and is deliverable from p_at; called by whoever put
-- it there, holding the channel guard shared, with p_channel read after the
-- guard.  What every producer owes the consumers:
--
--   * a wake-up, when a consumer has found the channel with nothing
--     deliverable before its wait_at and this message is earlier, unless one
--     as early is pending.  Inserting never blocks: the channel row is not
--     written.  Under REPEATABLE READ or SERIALIZABLE the row was read from
--     the transaction's snapshot, which may predate a consumer declaring the
--     channel empty: a wake-up whatever it said (one per transaction and
--     channel: the next dequeue applies them, at most 8 at a time).
--   * the floor lowered (a lowering row of channel_floor) when the message
--     lies below it, so that dequeues walk the channel from it.  In READ
--     COMMITTED the floor is read as committed now: the guard is held, so no
--     raise is in flight, and a later one sees this message.  Under
--     REPEATABLE READ or SERIALIZABLE the snapshot may predate a raise: the
--     clock decides instead.  A raise never sets the floor above its clock
--     less 20 ms and holds the guard exclusively until it commits, so the
--     clock read here, after the guard, is later than the raiser's: a
--     message dated at most 20 ms before it is above every floor, unless the
--     server's clock stepped back meanwhile (hence not in READ COMMITTED,
--     where the read is exact).  Older messages lower the floor whatever it
--     was.
--   * a notification, for a channel with notify that is not paused, when
--     the message is deliverable now: its name, or the payload it chose
--     (channel.notify_payload).
CREATE FUNCTION @extschema@._channel_arrival(
    p_channel @extschema@.channel,
    p_at bigint,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_ready_at bigint := pg_catalog.int8larger(p_at, p_now);
    v_read_committed boolean := pg_catalog.current_setting('transaction_isolation') = 'read committed';
    -- The floor (READ COMMITTED), or the lowest a raise may have set it.
    v_floor_at bigint;
BEGIN
    IF v_ready_at < p_channel.wait_at OR NOT v_read_committed THEN
        -- Unless one as early is pending; not looked for under REPEATABLE
        -- READ or SERIALIZABLE (CASE: the read is not even made), where the
        -- read and the insert made every two SERIALIZABLE producers of a
        -- channel a read/write dependency: 370 of 1,000 of them failed
        -- with 40001 beside READ COMMITTED consumers.
        INSERT INTO @extschema@.channel_wake (channel_id, wake_at)
        SELECT p_channel.id, v_ready_at
        WHERE CASE WHEN v_read_committed THEN NOT EXISTS (
            SELECT 1
            FROM @extschema@.channel_wake AS w
            WHERE w.channel_id = p_channel.id AND w.wake_at <= v_ready_at
        ) ELSE TRUE END;
    END IF;
    v_floor_at := CASE
        WHEN v_read_committed THEN @extschema@._channel_scan_from(p_channel.id)
        ELSE @extschema@._clock_ms() - 20
    END;
    IF p_at < v_floor_at THEN
        INSERT INTO @extschema@.channel_floor (channel_id, floor_at, is_raise)
        VALUES (p_channel.id, p_at, FALSE);
    END IF;
    IF p_channel.notify AND p_at <= p_now AND NOT p_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', COALESCE(p_channel.notify_payload, p_channel.name));
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_arrival(@extschema@.channel, bigint, bigint) IS
'Internal: what a producer owes the consumers of a channel it put a message in: a wake-up for a waiting channel, the floor lowered below the message, a notification.';

REVOKE ALL ON FUNCTION @extschema@._channel_arrival(@extschema@.channel, bigint, bigint) FROM PUBLIC;
