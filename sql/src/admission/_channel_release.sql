-- Internal: a take's deliveries of admitted messages in a channel with a
-- release interval (0.15.0): the interval starts again at p_now (the clock
-- after the take: it never starts before a delivery's lock), the messages
-- delivered no longer wait for their delivery (num_pending), and a wake due
-- at the interval's end (_channel_wake) has a dequeue's promotion run the
-- channel's admission walk then (_channel_admit), which admits the next
-- message.  The take admits nothing itself: admission is housekeeping.
-- A channel without a release interval (an ordered one) is left alone.
-- The caller (message_complete_dequeue, step 4) holds the channel's row
-- lock, which its take tried (_channel_release_try_lock), and the epoch's
-- parity (_epoch_hold) since before its clock read.  The row is written
-- newest version first (_channel_row says why).
-- Parameters: p_channel_id, the channel; p_delivered, how many of its
--   admitted messages the take delivered; p_now, the clock after the take.
-- Returns: nothing (void).
-- Calls: _channel_wake.
-- Tables: reads channel (channel_pkey, backwards: newest version first);
--   writes channel (release_at, num_pending and wake_id, by ctid); a wake's
--   through _channel_wake.
-- Locks: the channel row, by its update; the caller holds the channel's row
--   lock (advisory 1819111683, hashint8(p_channel_id)).
CREATE FUNCTION @extschema@._channel_release(p_channel_id bigint, p_delivered integer, p_now bigint)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    UPDATE @extschema@.channel AS c
    SET
        release_at = p_now + c.release_interval_ms,
        num_pending = pg_catalog.int4larger(c.num_pending - p_delivered, 0),
        wake_id = @extschema@._channel_wake(c.id, c.name, c.wake_id, p_now + c.release_interval_ms)
    WHERE
        c.ctid = (
            SELECT r.ctid FROM @extschema@.channel AS r
            WHERE r.id >= p_channel_id AND r.id <= p_channel_id
            ORDER BY r.id DESC LIMIT 1
        )
        AND c.release_interval_ms > 0;
$$;

COMMENT ON FUNCTION @extschema@._channel_release(bigint, integer, bigint) IS
'Internal: a take delivered admitted messages of a channel with a release interval: the interval starts again, and a wake at its end admits the next message.';

REVOKE ALL ON FUNCTION @extschema@._channel_release(bigint, integer, bigint) FROM PUBLIC;
