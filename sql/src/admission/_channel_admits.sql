-- Internal: whether a channel admits its messages (doc/dequeue-design.md,
-- "Limits as admission"): it has max_concurrency or a release interval, or
-- it is paused.  Its messages then wait for their admission instead of
-- taking a place at once.  The one statement of that rule; SQL and
-- IMMUTABLE: inlined into its callers (message_create writes it out, its
-- channel's columns not being a whole row).  NULL for no row (a channel
-- without configuration): callers read it as false.
-- Parameters: p_channel, the channel's row (its configuration), or NULL.
-- Returns: TRUE when the channel admits its messages; NULL for no row.
-- Calls: none.
-- Tables: none (the row is its argument)
-- Locks: none.
CREATE FUNCTION @extschema@._channel_admits(p_channel @extschema@.channel)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT p_channel.max_concurrency IS NOT NULL OR p_channel.release_interval_ms > 0 OR p_channel.is_paused
$$;

COMMENT ON FUNCTION @extschema@._channel_admits(@extschema@.channel) IS
'Internal: whether a channel admits its messages (max_concurrency, a release interval, or a pause).';

REVOKE ALL ON FUNCTION @extschema@._channel_admits(@extschema@.channel) FROM PUBLIC;
