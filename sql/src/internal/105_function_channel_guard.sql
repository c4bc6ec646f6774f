-- Internal: the channel guards, transaction-scoped advisory locks keyed by
-- the channel's name.  An advisory lock, not a row lock on the channel, so
-- that producers never lock the channel row: row locks of many producers on
-- a row that consumers keep updating make multixacts, and locking a row
-- through such a chain waits even under SKIP LOCKED.  A key collision only
-- makes two channels wait for each other a little.
--
-- The producer guard (1819111681, hashtext(name)): producers (and defer,
-- fail, redrive, schedules) hold it shared until they commit; a consumer
-- may put a channel to sleep or raise its floor only while it holds it
-- exclusively, which it only tries for (never waits).
--
-- The consumer guard (1819111682, hashtext(name)): consumers hold it shared
-- while they take from the channel, so that channel_set, which takes both
-- guards exclusively and waits (as do channel_drop and channel_pause),
-- counts their locks, and they see its limits.  Two keys, so that no
-- consumer ever waits for another one's sleep or floor raise.
CREATE FUNCTION @extschema@._channel_guard_shared(p_channel text)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock_shared(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_shared(text) IS
'Internal: hold the channel guard shared until the end of the transaction (waits for an exclusive holder).';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_shared(text) FROM PUBLIC;

CREATE FUNCTION @extschema@._channel_guard_try_shared(p_channel text)
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_try_advisory_xact_lock_shared(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_try_shared(text) IS
'Internal: take the channel guard shared if no one holds it exclusively; never waits.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_shared(text) FROM PUBLIC;

CREATE FUNCTION @extschema@._channel_guard_try_exclusive(p_channel text)
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_try_advisory_xact_lock(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_try_exclusive(text) IS
'Internal: take the channel guard exclusively if no producer is in flight; never waits.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_exclusive(text) FROM PUBLIC;

CREATE FUNCTION @extschema@._channel_guard_exclusive(p_channel text)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT
        pg_catalog.pg_advisory_xact_lock(1819111681, pg_catalog.hashtext(p_channel)),
        pg_catalog.pg_advisory_xact_lock(1819111682, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_exclusive(text) IS
'Internal: take both channel guards exclusively, waiting for the producers and consumers in flight.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_exclusive(text) FROM PUBLIC;

CREATE FUNCTION @extschema@._channel_guard_consumer(p_channel text)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock_shared(1819111682, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_consumer(text) IS
'Internal: hold the consumer guard shared until the end of the transaction (waits for channel_set, channel_drop, channel_pause).';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_consumer(text) FROM PUBLIC;
