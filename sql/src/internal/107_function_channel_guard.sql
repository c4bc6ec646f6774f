-- Internal: the channel guard, a transaction-scoped advisory lock keyed by
-- the channel's name (1819111681, hashtext(name)).  Every call that decides
-- a message's state from its channel's configuration (a create, a batch, a
-- redrive, a retry, a defer, a promotion) holds it shared until it commits;
-- a call that changes what that decision reads (channel_set, channel_pause,
-- channel_resume, channel_drop) takes it exclusively, waiting for those in
-- flight, so that no message put under the old configuration commits after
-- the new one (a paused channel delivers nothing from the pause on; a new
-- limit counts every message).  Producers of different channels, and
-- consumers, never wait for each other on it.  An advisory lock, not a row
-- lock: a channel without configuration has no row, and many producers'
-- row locks on one row would make multixacts.  A key collision only makes
-- two channels' configuration changes wait a little for each other's
-- producers.
CREATE FUNCTION @extschema@._channel_guard_shared(p_channel text)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock_shared(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_shared(text) IS
'Internal: hold the channel guard shared until the end of the transaction (waits for a configuration change in flight).';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_shared(text) FROM PUBLIC;

CREATE FUNCTION @extschema@._channel_guard_try_shared(p_channel text)
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_try_advisory_xact_lock_shared(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_try_shared(text) IS
'Internal: take the channel guard shared unless a configuration change holds it; never waits.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_shared(text) FROM PUBLIC;

CREATE FUNCTION @extschema@._channel_guard_exclusive(p_channel text)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(1819111681, pg_catalog.hashtext(p_channel))
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_exclusive(text) IS
'Internal: hold the channel guard exclusively until the end of the transaction, waiting for the calls in flight that hold it shared.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_exclusive(text) FROM PUBLIC;
