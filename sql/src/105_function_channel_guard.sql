-- Internal: the channel guard, a transaction-scoped advisory lock keyed by
-- the channel's name.  Producers (and defers) hold it shared until they
-- commit; a consumer may declare a channel empty or waiting only while it
-- holds it exclusively, which it only tries for (never waits); channel_set
-- and channel_drop take it exclusively and wait.  An advisory lock, not a
-- row lock on the channel, so that producers never lock the channel row:
-- row locks of many producers on a row that consumers keep updating make
-- multixacts, and locking a row through such a chain waits even under SKIP
-- LOCKED.  The key is (1819111681, hashtext(name)); a collision only makes
-- two channels wait for each other a little.
CREATE FUNCTION @extschema@._channel_guard_shared(p_channel text)
RETURNS void
LANGUAGE sql
VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock_shared(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_shared(text) IS
'Internal: hold the channel guard shared until the end of the transaction (waits for an exclusive holder).';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_shared(text) FROM PUBLIC;

CREATE FUNCTION @extschema@._channel_guard_try_shared(p_channel text)
RETURNS boolean
LANGUAGE sql
VOLATILE
AS $$
    SELECT pg_catalog.pg_try_advisory_xact_lock_shared(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_try_shared(text) IS
'Internal: take the channel guard shared if no one holds it exclusively; never waits.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_shared(text) FROM PUBLIC;

CREATE FUNCTION @extschema@._channel_guard_try_exclusive(p_channel text)
RETURNS boolean
LANGUAGE sql
VOLATILE
AS $$
    SELECT pg_catalog.pg_try_advisory_xact_lock(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_try_exclusive(text) IS
'Internal: take the channel guard exclusively if no producer is in flight; never waits.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_exclusive(text) FROM PUBLIC;

CREATE FUNCTION @extschema@._channel_guard_exclusive(p_channel text)
RETURNS void
LANGUAGE sql
VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_exclusive(text) IS
'Internal: take the channel guard exclusively, waiting for producers in flight.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_exclusive(text) FROM PUBLIC;
