-- Internal: whether a channel's takes claim (0.15.0): it has
-- max_concurrency, and no release interval, pause or order.  Its messages
-- are placed like an unlimited channel's, with message.is_limited, and a
-- take claims a unit of channel.num_admitted for each (_channel_claim), so
-- that max_concurrency counts locks.  A channel with a release interval, a
-- pause or order keeps admission by promotion (_channel_admit): what it
-- delivers next depends on more than a count.
-- Parameters: p_channel, the channel's configuration (its row, or its
--   pattern's follower row).
-- Returns: whether its takes claim; NULL for a NULL configuration.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._channel_claims(p_channel @extschema@.channel)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT p_channel.max_concurrency IS NOT NULL AND p_channel.release_interval_ms = 0
        AND NOT p_channel.is_paused AND NOT p_channel.is_ordered
$$;

COMMENT ON FUNCTION @extschema@._channel_claims(@extschema@.channel) IS
'Internal: whether a channel''s takes claim (max_concurrency without a release interval, pause or order).';

REVOKE ALL ON FUNCTION @extschema@._channel_claims(@extschema@.channel) FROM PUBLIC;
