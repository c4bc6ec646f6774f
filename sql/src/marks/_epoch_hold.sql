-- Internal: hold the parity of epoch p_epoch (position_bound_seq's value:
-- bound * 2 + parity) shared until the transaction ends, as every writer of
-- a position or of message_due_ix does (_marks_raise waits for the previous
-- parity to be free).  The one place the advisory key 1819111690 is held
-- shared.  SQL: inlined into the statement that calls it.
-- Parameters: p_epoch, an epoch as position_bound_seq holds it (bound * 2 +
--   parity).
-- Returns: nothing (void).
-- Calls: none.
-- Tables: none (its callers read position_bound_seq and pass its value)
-- Locks: advisory (1819111690, p_epoch & 1) shared until the transaction
--   ends (the epoch guard: outside the lock order, as its one exclusive
--   taker, a raise, only tries it and releases it at once).
CREATE FUNCTION @extschema@._epoch_hold(p_epoch bigint)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock_shared(1819111690, (p_epoch & 1)::integer)
$$;

COMMENT ON FUNCTION @extschema@._epoch_hold(bigint) IS
'Internal: hold an epoch''s parity shared until commit.';

REVOKE ALL ON FUNCTION @extschema@._epoch_hold(bigint) FROM PUBLIC;
