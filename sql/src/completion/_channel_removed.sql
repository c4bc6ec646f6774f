-- Internal: messages left their channels (completed, cancelled, dead), one
-- in channel p_channel_ids[k] for each k: a channel with max_size counts
-- them (held = channel_quota.num_created - num_removed).  Other channels'
-- rows are not touched: the UPDATE matches none of them.  Consumers write
-- num_removed, producers channel_quota, so a complete never waits for a
-- producer.
-- Parameters: p_channel_ids.
-- Tables: channel (update).
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
