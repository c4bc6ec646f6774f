-- Internal: a channel's id, the hash of its name.  Messages, keys and
-- quotas refer to a channel by it whether or not it has a row, so a channel
-- without configuration needs none.  Two names with one hash (about one
-- chance in 10^12 among a million channels) share their places in the
-- round order and nothing else: every probe by name checks the name too.
-- SQL and IMMUTABLE: inlined into its callers' plans.
-- Parameters: p_channel, the channel's name.
-- Returns: hashtextextended(p_channel, 0), a bigint.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._channel_id(p_channel text)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.hashtextextended(p_channel, 0)
$$;

COMMENT ON FUNCTION @extschema@._channel_id(text) IS
'Internal: a channel''s id, the hash of its name.';

REVOKE ALL ON FUNCTION @extschema@._channel_id(text) FROM PUBLIC;
