-- Internal: whether a channel's messages wait for their admission by
-- promotion (0.15.0): it admits (_channel_admits: limits or a pause) and
-- its takes do not claim (_channel_claims): it has a release interval, is
-- paused, or is ordered with its max_concurrency.  Such a message is
-- created, retried or redriven without a place, due, and a dequeue's
-- promotion holds it for _channel_admit.  The one statement of that rule
-- (message_create writes it out, its channel's columns not being a whole
-- row); SQL and IMMUTABLE: inlined into its callers.
-- Parameters: p_channel, the channel's configuration (its row, or its
--   pattern's follower row).
-- Returns: whether its messages wait for admission; NULL for a NULL
--   configuration (callers read it as false).
-- Calls: _channel_admits, _channel_claims (both inlined).
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._channel_promotes(p_channel @extschema@.channel)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT @extschema@._channel_admits(p_channel) AND NOT @extschema@._channel_claims(p_channel)
$$;

COMMENT ON FUNCTION @extschema@._channel_promotes(@extschema@.channel) IS
'Internal: whether a channel''s messages wait for admission by promotion (limits or a pause, and takes that do not claim).';

REVOKE ALL ON FUNCTION @extschema@._channel_promotes(@extschema@.channel) FROM PUBLIC;
