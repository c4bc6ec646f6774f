-- Internal: raise the position mark and the due mark, and start a new
-- epoch, if no other raise is in flight (the raise lock, advisory
-- (1819111690, 2), held until the caller's transaction ends) and every
-- writer of the previous epoch has finished (its parity can
-- be locked exclusively at once; session-level, released at once, so a
-- raiser never holds it while its own transaction runs on).  Then every
-- writer in flight entered the current epoch: its positions are at least
-- the current bound, its due entries at least epoch_at.  So:
--   position mark <- least(bound, the first ready position), read without
--     SKIP LOCKED: a take in flight, which may still roll back, counts;
--   due mark <- least(epoch_at - 100 ms, the first scheduled or locked
--     dequeue_at below it); the margin covers a backward step of the
--     system clock up to 100 ms between two backends' readings (tick()
--     promotes from the beginning of the due index, for larger ones);
--   a new epoch: epoch_at <- p_now, then the bound <- the first ready
--     position, with the other parity (in this order: a writer that sees the
--     new epoch reads its clock after epoch_at was set).
-- Called by a dequeue that took 16 messages or more, one call in 16
-- otherwise, or when what it took lay 16 rounds past the mark.  A raise never waits; one that finds the
-- previous epoch busy does nothing.
-- Parameters: p_now, the caller's clock; p_taken, the least position the
--   caller took, which its own read no longer sees as ready but which its
--   rollback (or a crash before its commit) would make ready again;
--   p_taken_last, the greatest (when nothing else is ready, new messages
--   go after it); p_from, where other ready positions may lie above
--   p_taken: p_taken_last + 1 after a take of the first turns of the
--   round order (what lies between was taken by this call or by others in
--   flight), p_taken after one channel's turns (other channels' turns lie
--   between them: a bound past them sent every new message behind them).  The caller's transaction wrote nothing before
--   the call: it took nothing else.
-- Returns: whether the marks were raised.
-- Tables: reads message (message_ready_ix, message_due_ix, from the marks).
CREATE FUNCTION @extschema@._marks_raise(p_now bigint, p_taken bigint, p_taken_last bigint, p_from bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    -- One raise at a time: the raise lock first, until this transaction
    -- ends (another raise meanwhile does nothing), then the epoch and the
    -- marks read under it (initialisers run in order; no other raise can
    -- change them then), then the previous parity.  Two raises that both
    -- read epoch E and both found its previous parity free both started
    -- "epoch E + 1": the second, from its stale reads, set a bound above
    -- and an epoch_at after what the writers that had entered the first
    -- one wrote, and the next raise passed their positions and due entries
    -- (the soak test, under load: a ready message below the position mark,
    -- waiting ones below the due mark, never delivered).
    v_is_alone boolean := pg_catalog.pg_try_advisory_xact_lock(1819111690, 2);
    v_epoch bigint := pg_catalog.pg_sequence_last_value('@extschema@.position_bound_seq');
    v_mark bigint := pg_catalog.pg_sequence_last_value('@extschema@.position_mark_seq');
    v_due_mark bigint := pg_catalog.pg_sequence_last_value('@extschema@.due_mark_seq');
    v_epoch_at bigint := pg_catalog.pg_sequence_last_value('@extschema@.epoch_at_seq');
    v_front bigint;
    v_first_due bigint;
BEGIN
    IF NOT (v_is_alone AND pg_catalog.pg_try_advisory_lock(1819111690, (1 - (v_epoch & 1))::integer)) THEN
        RETURN FALSE;
    END IF;
    PERFORM pg_catalog.pg_advisory_unlock(1819111690, (1 - (v_epoch & 1))::integer);
    -- The first ready position, below what the caller took or from p_from,
    -- without walking the caller's own takes (dead entries to its read).
    v_front := LEAST(
        (SELECT r.position FROM @extschema@.message AS r WHERE r.position >= v_mark AND r.position < p_taken ORDER BY r.position LIMIT 1),
        (SELECT r.position FROM @extschema@.message AS r WHERE r.position >= p_from ORDER BY r.position LIMIT 1)
    );
    -- Only below the candidate due mark: the live entries above it do not
    -- matter, and the completed locks up to them are what the mark is
    -- there to skip.
    SELECT GREATEST(d.dequeue_at, d.created_at) INTO v_first_due
    FROM @extschema@.message AS d
    WHERE
        GREATEST(d.dequeue_at, d.created_at) >= v_due_mark AND GREATEST(d.dequeue_at, d.created_at) < v_epoch_at - 100
        AND d.position IS NULL AND NOT d.is_held
    ORDER BY GREATEST(d.dequeue_at, d.created_at)
    LIMIT 1;
    PERFORM
        -- Below what the caller took and every other ready position.
        pg_catalog.setval('@extschema@.position_mark_seq', LEAST(v_front, p_taken, v_epoch >> 1)),
        pg_catalog.setval('@extschema@.due_mark_seq', GREATEST(v_due_mark, LEAST(v_epoch_at - 100, v_first_due))),
        pg_catalog.setval('@extschema@.epoch_at_seq', p_now);
    -- The new epoch's bound: the front, or past what the caller took when
    -- nothing else is ready, so that new messages never take a
    -- consumed position again (the marks could then never pass it).
    PERFORM pg_catalog.setval(
        '@extschema@.position_bound_seq',
        GREATEST(COALESCE(v_front, p_taken_last + 1), v_epoch >> 1) * 2 + 1 - (v_epoch & 1)
    );
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@._marks_raise(bigint, bigint, bigint, bigint) IS
'Internal: raise the position and due marks and start a new epoch, when no writer of the previous epoch is in flight; never waits.';

REVOKE ALL ON FUNCTION @extschema@._marks_raise(bigint, bigint, bigint, bigint) FROM PUBLIC;
