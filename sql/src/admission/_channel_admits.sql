-- Internal: whether a channel admits its messages (doc/dequeue-design.md,
-- "Limits as admission"): it has max_concurrency or a release interval, or
-- it is paused.  Its messages then wait for their admission instead of
-- taking a place at once.  The one statement of that rule; SQL and
-- IMMUTABLE: inlined into its callers.  NULL for no row (a channel without
-- configuration): callers read it as false.
CREATE FUNCTION @extschema@._channel_admits(p_channel @extschema@.channel)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT p_channel.max_concurrency IS NOT NULL OR p_channel.release_interval_ms > 0 OR p_channel.is_paused
$$;

COMMENT ON FUNCTION @extschema@._channel_admits(@extschema@.channel) IS
'Internal: whether a channel admits its messages (max_concurrency, a release interval, or a pause).';

REVOKE ALL ON FUNCTION @extschema@._channel_admits(@extschema@.channel) FROM PUBLIC;
