-- Internal: messages left their channels (completed, cancelled, dead), one in
-- channel p_channel_ids[k] for each k: a channel with max_size counts them in
-- num_removed (its messages = channel_quota.num_created - num_removed).  Other
-- channels' rows are not touched: the UPDATE matches none of them.  Consumers
-- write num_removed, producers channel_quota, so a completion never waits for
-- a producer.  Each row is read newest version first and written by the ctid
-- found (_channel_row says why).  Callers: _message_complete_set,
-- _message_bury, message_cancel.
-- Parameters: p_channel_ids, the channel of each message that left, one
--   element per message (a channel repeated counts that many).
-- Returns: nothing.
-- Calls: none.
-- Tables: reads channel (channel_pkey, backwards: each row's newest version
--   and its max_size); writes channel (num_removed of max_size channels).
-- Locks: the max_size channels' rows it updates, whose channel row lock,
--   advisory (1819111683, hashint8(channel id)), the caller holds
--   (_channel_rows_lock, _message_channel, _message_promote); no advisory lock
--   of its own.
CREATE FUNCTION @extschema@._channel_removed(p_channel_ids bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    -- (Each row newest version first, under its row lock, which the
    -- caller holds: _channel_row says why.)
    UPDATE @extschema@.channel AS c
    SET num_removed = c.num_removed + pg_catalog.cardinality(pg_catalog.array_positions(p_channel_ids, c.id))
    FROM (SELECT DISTINCT a.id FROM pg_catalog.unnest(p_channel_ids) AS a (id)) AS a
    CROSS JOIN LATERAL (
        SELECT r.ctid, r.max_size FROM @extschema@.channel AS r
        WHERE r.id >= a.id AND r.id <= a.id
        ORDER BY r.id DESC LIMIT 1
    ) AS r
    -- (The newest version's max_size: a condition inside the LIMIT would
    -- walk every version of a row it refuses.)
    WHERE c.ctid = r.ctid AND r.max_size IS NOT NULL;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_removed(bigint[]) IS
'Internal: count messages that left their channels, for channels with max_size.';

REVOKE ALL ON FUNCTION @extschema@._channel_removed(bigint[]) FROM PUBLIC;
