-- Internal: enter the current epoch before writing a position or an entry
-- of message_due_ix (a lock's expiry, a schedule's occurrence).  Holds the epoch's parity
-- (advisory lock 1819111690, parity) shared until the transaction ends, so
-- that _marks_raise, which needs the previous epoch's parity free before it
-- raises the marks, waits for this writer; and re-reads the epoch after the
-- lock, so that a raise between the read and the lock cannot leave this
-- writer with an older bound unnoticed (the loop takes the newer epoch too;
-- holding both parities is harmless: it only delays a raise).
-- Parameters: none.
-- Returns: the bound: every position the caller writes must be at least it;
--   the caller's clock, read after this, is at least the epoch's start
--   (epoch_at_seq).
-- Calls: _epoch_hold.
-- Tables: reads position_bound_seq (its last value: the epoch, bound * 2 +
--   parity).
-- Locks: advisory (1819111690, the epoch's parity) shared until the
--   transaction ends (_epoch_hold); both parities when a raise came between
--   the read and the lock.
CREATE FUNCTION @extschema@._epoch_enter()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_seen bigint;
    v_epoch bigint := pg_catalog.pg_sequence_last_value('@extschema@.position_bound_seq');
BEGIN
    LOOP
        v_seen := v_epoch;
        PERFORM @extschema@._epoch_hold(v_seen);
        v_epoch := pg_catalog.pg_sequence_last_value('@extschema@.position_bound_seq');
        EXIT WHEN v_epoch = v_seen;
    END LOOP;
    RETURN v_epoch >> 1;
END;
$$;

COMMENT ON FUNCTION @extschema@._epoch_enter() IS
'Internal: hold the current epoch''s parity shared until commit; returns the bound that positions written now must reach.';

REVOKE ALL ON FUNCTION @extschema@._epoch_enter() FROM PUBLIC;
