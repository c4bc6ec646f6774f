-- Internal: a producer of a size-limited channel asks room for p_want
-- messages.  Locks the channel's quota row (producers of the channel
-- serialise here until they commit), grants as many as the channel has
-- room for, counts them as created, and returns how many were granted.
-- The channel's messages = channel_quota.num_created - channel.num_removed:
-- producers write the first, consumers the second (_channel_removed), so
-- that a completion never waits for a producer.  num_removed is read
-- without a lock: a removal not yet committed only makes the grant smaller.
-- Parameters: p_channel_id, the channel's id; p_max_size, its max_size;
--   p_want, how many messages the producer would store.
-- Returns: how many it may store (0 to p_want), already counted as created.
-- Calls: _channel_row.
-- Tables: reads channel_quota (channel_quota_pkey, backwards: newest version
--   first); writes channel_quota (num_created, by the ctid it was locked at)
--   (the channel's num_removed is read through _channel_row).
-- Locks: the channel's channel_quota row FOR UPDATE until the transaction
--   ends (waits for another producer of the channel), which it updates.
--   In the lock order, after the channel guard and before message rows.
CREATE FUNCTION @extschema@._channel_quota_take(
    p_channel_id bigint,
    p_max_size integer,
    p_want integer
)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_quota record;
    v_removed bigint;
    v_granted integer;
BEGIN
    -- Both rows newest version first, the quota's written by the ctid it
    -- was locked at (a row written by every producer: _channel_row says
    -- why).
    SELECT q.ctid AS tid, q.num_created INTO v_quota
    FROM @extschema@.channel_quota AS q
    WHERE q.channel_id >= p_channel_id AND q.channel_id <= p_channel_id
    ORDER BY q.channel_id DESC
    LIMIT 1
    FOR UPDATE;
    SELECT c.num_removed INTO v_removed
    FROM @extschema@._channel_row(p_channel_id, NULL) AS c;
    v_granted := LEAST(p_want, GREATEST(p_max_size - (v_quota.num_created - v_removed), 0));
    IF v_granted > 0 THEN
        UPDATE @extschema@.channel_quota AS q
        SET num_created = q.num_created + v_granted
        WHERE q.ctid = v_quota.tid;
    END IF;
    RETURN v_granted;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_quota_take(bigint, integer, integer) IS
'Internal: room for up to p_want messages in a size-limited channel, counted as created; serialises its producers.';

REVOKE ALL ON FUNCTION @extschema@._channel_quota_take(bigint, integer, integer) FROM PUBLIC;
