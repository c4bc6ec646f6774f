-- Internal: the channel guard, a transaction-scoped advisory lock keyed by
-- the channel's name (1819111681, hashtext(name)).  Every call that decides
-- a message's state from its channel's configuration (a create, a batch, a
-- redrive, a retry, a defer: waiting; a promotion, a schedule's
-- occurrence among them: trying, and skipping the channel when it is held) holds it shared until
-- it commits; a call that changes what that decision reads (channel_set,
-- channel_pause, channel_resume, channel_drop, a pattern's application)
-- takes it exclusively, waiting for those in flight, so that no message put
-- under the old configuration commits after the new one (a paused channel
-- delivers nothing from the pause on; a new limit counts every message).
-- Producers of different channels, and consumers, never wait for each
-- other on it.  An advisory lock, not a row lock: a channel without
-- configuration has no row, and many producers' row locks on one row would
-- make multixacts.  A key collision only makes two channels'
-- configuration changes wait a little for each other's producers.
--
-- The bucket guards (1819111682, hashtext(name) & 31).  Every advisory
-- lock a transaction holds takes an entry of the server's shared lock
-- table, sized for max_locks_per_transaction (64 by default) per
-- connection: one guard per channel would make a producer of 40,000 new
-- channels in one transaction fail with 53200 (out of shared memory).  So
-- a transaction holds at most 32 shared channel guards (counted in the
-- transaction-local setting lonnymq.channel_guards: calls, not distinct
-- channels); from its 33rd guard on (its 32nd, when it had written before
-- its first) it holds the channel's bucket guard instead, which stands for
-- the 1/32 of all channels whose names hash there: at most 64 guards in
-- all, whatever the number of channels.  A configuration change takes its
-- channel's bucket guard exclusively after its channel guard, so it waits
-- for such transactions in flight that reached a channel of its bucket
-- (and, while it waits or runs, they wait for it or, trying, skip those
-- channels).  The exclusive guards are not counted: a pattern's
-- application takes one channel guard per channel it visits.
--
-- The guards' modes: advisory (1819111681, hashtext(name)) or (1819111682,
-- hashtext(name) & 31) shared by the deciding calls; both exclusive by the
-- configuration changes, in that order; all until the transaction ends.
--
-- _channel_guard_later: a transaction's guard after its first, counted.
-- A transaction without an xid has taken no guard yet (its first takes it
-- one, inline in the guards below): that guard is its own, and not
-- written down.  Every later one counts one more in the setting (the
-- count starts at 1, for that first guard or for nothing, and stops at
-- 33) and is its own up to 32; the one place the 32 is written.  Out of
-- line (PL/pgSQL is never inlined), so that the common producer, one
-- message per transaction, neither runs nor prepares it: a setting
-- written in a transaction, and the expression that writes it, cost about
-- 1% of a worker loop's CPU.  Writes the setting lonnymq.channel_guards.
-- Parameters: p_channel, the channel's name; p_try, whether to try the
--   guard rather than wait for it.
-- Returns: whether the guard is held (always TRUE when p_try is FALSE).
-- Calls: none.
-- Tables: none.
-- Locks: advisory (1819111681, hashtext(p_channel)) up to the 32nd guard,
--   else (1819111682, hashtext(p_channel) & 31), shared, waited for or
--   tried (p_try), until the transaction ends.
CREATE FUNCTION @extschema@._channel_guard_later(p_channel text, p_try boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_count integer := LEAST(32, COALESCE(
        NULLIF(pg_catalog.current_setting('lonnymq.channel_guards', TRUE), ''), '1')::integer) + 1;
    v_key1 integer := CASE WHEN v_count <= 32 THEN 1819111681 ELSE 1819111682 END;
    v_key2 integer := CASE WHEN v_count <= 32 THEN pg_catalog.hashtext(p_channel) ELSE pg_catalog.hashtext(p_channel) & 31 END;
BEGIN
    PERFORM pg_catalog.set_config('lonnymq.channel_guards', v_count::text, TRUE);
    IF p_try THEN
        RETURN pg_catalog.pg_try_advisory_xact_lock_shared(v_key1, v_key2);
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(v_key1, v_key2);
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_later(text, boolean) IS
'Internal: a transaction''s channel guard after its first: count it (lonnymq.channel_guards, up to 33) and hold, or try, the channel''s own guard up to the 32nd, its bucket''s after.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_later(text, boolean) FROM PUBLIC;

-- (Each guard one expression, so that the planner inlines it into its
-- caller's statement: a transaction's first guard takes its xid and the
-- channel's own guard; later ones are _channel_guard_later's.  CASE and
-- AND evaluate in the order written.)
--
-- _channel_guard_shared: hold the channel's guard shared, waiting for a
-- configuration change in flight.  Called by the calls that decide a
-- message's state and may wait: message_create, message_create_batch,
-- dead_letter_redrive, and _message_channel (retries and defers).
-- Parameters: p_channel, the channel's name.
-- Returns: nothing.
-- Calls: _channel_guard_later (past the transaction's first guard).
-- Tables: none.
-- Locks: advisory (1819111681, hashtext(p_channel)) shared until the
--   transaction ends, waited for; from the 33rd guard on (1819111682,
--   hashtext(p_channel) & 31) instead (_channel_guard_later).  A
--   transaction without an xid is given one here.
CREATE FUNCTION @extschema@._channel_guard_shared(p_channel text)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT CASE
        WHEN pg_catalog.pg_current_xact_id_if_assigned() IS NULL AND pg_catalog.pg_current_xact_id() IS NOT NULL
            THEN pg_catalog.pg_advisory_xact_lock_shared(1819111681, pg_catalog.hashtext(p_channel))
        WHEN @extschema@._channel_guard_later(p_channel, FALSE) THEN NULL
    END
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_shared(text) IS
'Internal: hold the channel guard shared until the end of the transaction (waits for a configuration change in flight); past a transaction''s 32nd guard, its bucket guard instead.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_shared(text) FROM PUBLIC;

-- Internal: try the channel's guard shared; never waits.  A false answer
-- means a configuration change of the channel (or, past the transaction's
-- 32nd guard, of a channel of its bucket) is in flight: the caller
-- (_message_promote) skips the channel and comes back later.
-- Parameters: p_channel, the channel's name.
-- Returns: whether the guard is now held.
-- Calls: _channel_guard_later (past the transaction's first guard).
-- Tables: none.
-- Locks: advisory (1819111681, hashtext(p_channel)) shared until the
--   transaction ends, tried; from the 33rd guard on (1819111682,
--   hashtext(p_channel) & 31) instead (_channel_guard_later).  A
--   transaction without an xid is given one here.
CREATE FUNCTION @extschema@._channel_guard_try_shared(p_channel text)
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
    SELECT CASE
        WHEN pg_catalog.pg_current_xact_id_if_assigned() IS NULL AND pg_catalog.pg_current_xact_id() IS NOT NULL
            THEN pg_catalog.pg_try_advisory_xact_lock_shared(1819111681, pg_catalog.hashtext(p_channel))
        ELSE @extschema@._channel_guard_later(p_channel, TRUE)
    END
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_try_shared(text) IS
'Internal: take the channel guard shared (past a transaction''s 32nd guard, its bucket guard) unless a configuration change holds it; never waits.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_try_shared(text) FROM PUBLIC;

-- Internal: hold the channel's guard and then its bucket guard exclusively,
-- waiting for the calls in flight that hold either shared: the first step
-- of every configuration change (channel_set, channel_pause,
-- channel_resume, channel_drop, _channel_pattern_apply for each channel it
-- changes).  Two statements: not inlined, and not counted in
-- lonnymq.channel_guards.
-- Parameters: p_channel, the channel's name.
-- Returns: nothing.
-- Calls: none.
-- Tables: none.
-- Locks: advisory (1819111681, hashtext(p_channel)), then (1819111682,
--   hashtext(p_channel) & 31), both exclusive, waited for, until the
--   transaction ends.
CREATE FUNCTION @extschema@._channel_guard_exclusive(p_channel text)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(1819111681, pg_catalog.hashtext(p_channel));
    SELECT pg_catalog.pg_advisory_xact_lock(1819111682, pg_catalog.hashtext(p_channel) & 31);
$$;

COMMENT ON FUNCTION @extschema@._channel_guard_exclusive(text) IS
'Internal: hold the channel guard and its bucket guard exclusively until the end of the transaction, waiting for the calls in flight that hold either shared.';

REVOKE ALL ON FUNCTION @extschema@._channel_guard_exclusive(text) FROM PUBLIC;
