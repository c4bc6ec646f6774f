-- Internal: whether the delivery of an admitted message of this channel
-- may go ahead.  A delivery in a channel with a release interval starts
-- the interval again (message_complete_dequeue, step 4), under the
-- channel's row lock: the lock is tried here, never waited for (two calls
-- that each waited for a channel row after their completions locked others
-- deadlocked), and a message whose lock is not had is left for a later
-- call.  A channel without a release interval needs no lock.  The row is
-- read newest version first (_channel_row says why).  PL/pgSQL, which is
-- never inlined: a delivery of a message that was not admitted, the
-- common one, neither runs nor prepares this probe (in the take's
-- statement it cost about 0.4% of a worker loop's CPU).
-- Parameters: p_channel_id, the message's channel.
-- Returns: TRUE when the channel has no release interval or its row lock
--   was taken; FALSE when another transaction holds that lock.
-- Calls: _channel_row_try_lock.
-- Tables: reads channel (channel_pkey, backwards).
-- Locks: advisory (1819111683, hashint8(p_channel_id)), tried, until the
--   transaction ends, when the channel has a release interval.
CREATE FUNCTION @extschema@._channel_release_try_lock(p_channel_id bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RETURN NOT COALESCE((
        SELECT c.release_interval_ms > 0 FROM @extschema@.channel AS c
        WHERE c.id >= p_channel_id AND c.id <= p_channel_id
        ORDER BY c.id DESC LIMIT 1
    ), FALSE) OR @extschema@._channel_row_try_lock(p_channel_id);
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_release_try_lock(bigint) IS
'Internal: whether an admitted message''s delivery may go ahead: its channel has no release interval, or the channel''s row lock was taken (tried, never waited for).';

REVOKE ALL ON FUNCTION @extschema@._channel_release_try_lock(bigint) FROM PUBLIC;
