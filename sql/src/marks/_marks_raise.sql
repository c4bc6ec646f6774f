-- Internal: raise the position mark and the due mark, and start a new
-- epoch, if no other raise is in flight (the raise lock, advisory
-- (1819111690, 2), held until the caller's transaction ends) and every
-- writer of the previous epoch has finished (its parity can be locked
-- exclusively at once; session-level, released at once, so a raiser never
-- holds it while its own transaction runs on).  Then every writer in
-- flight entered the current epoch: its positions are at least the
-- current bound, its due entries at least epoch_at.
--
-- What the raise reads (the first ready position, the first due entry)
-- must include every writer that has finished.  Which snapshot reads it
-- (doc/dequeue-design.md, "A raise at every isolation level"):
--   READ COMMITTED: each statement takes a new snapshot, after the parity
--     lock was found free: it sees every writer of the previous epoch.  The
--     limits are the current epoch's: its bound and epoch_at;
--   REPEATABLE READ, SERIALIZABLE: the transaction's snapshot, perhaps
--     older than the parity check: a writer of the previous epoch may have
--     committed after it, unseen.  The raise goes ahead only when the
--     transaction whose raise started the current epoch (epoch_raiser_seq)
--     had ended before the snapshot was taken: then the snapshot postdates
--     the current epoch's start, every writer of the epoch before the
--     previous one had finished by then (that raise checked it), and the
--     writers it may miss entered the previous epoch, whose positions are
--     at least its bound and whose due entries at least its start.  The
--     limits are the previous epoch's (epoch_previous_bound_seq,
--     epoch_previous_at_seq): the marks lag one epoch behind.  Else the
--     raise does nothing; a later one will.
-- So, with the limits (bound, start) of whichever case:
--   position mark <- least(bound, the first ready position), read without
--     SKIP LOCKED: a take in flight, which may still roll back, counts.
--     The caller has taken no position yet (a raise runs before the take,
--     _housekeeping), so its own read misses none;
--   due mark <- least(start - 100 ms, the first key of message_due_ix,
--     greatest(dequeue_at, created_at), below it (a scheduled, waiting or
--     locked message, a schedule's pending occurrence), and the least key
--     this transaction took out of that index, lonnymq.due_taken: what the
--     dequeue promoted or buried, the expired locks it completed, which its own
--     read no longer sees as due but which its rollback would make due
--     again (_due_taken_note)); the margin covers a backward step of the
--     system clock up to 100 ms between two backends' readings (tick()
--     promotes from the beginning of the due index, for larger ones);
--   neither mark ever moves down (what lies below a mark never changes);
--   a new epoch: its bound <- the first ready position that the caller's
--     take will leave (the (p_take + 1)-th from the mark), or past the
--     last ready one when it may take them all, or, when none is ready,
--     one round past the current bound; never below the current bound;
--     with the other parity.  So the messages that come next are not
--     placed at positions about to be consumed, whose dead entries would
--     then lie among them for ever under an old snapshot (the mark could
--     never pass them); epoch_at <- p_now (every writer that sees the new epoch reads
--     its clock after p_now was read); the raiser and the previous epoch's
--     values recorded last, then the deliveries counted when it began.
--     The sequences are not transactional: a raise cut short (an error, a
--     cancel, a crash) leaves a prefix of these writes, and every prefix is safe: the previous epoch's values are
--     never newer than the epoch the recorded raiser started.
-- Called by the housekeeping (_housekeeping) of a dequeue, before its take,
-- when _marks_turn_deliveries (8) messages or more were delivered since
-- the last raise, and of tick(); it does nothing when no message was
-- delivered since the last raise (it records messages_delivered_seq in
-- marks_delivered_seq: the marks would not move, and idle pollers write
-- nothing).  A raise never
-- waits; one that finds the previous epoch busy does nothing.
-- Parameters: p_now, the caller's clock; p_take, how many of the first
--   ready positions the caller's take may consume next (0: none, or one
--   channel's, whose turns lie among the others').  The caller's transaction had
--   written nothing before the call that calls this (that call's own
--   completions and promotions aside, which take no position and note
--   their due keys): it has taken no position.
-- Returns: whether the marks were raised.
-- Calls: _xact_seen (only outside READ COMMITTED; not inlined: its
--   argument, a sequence's last value, is volatile and used twice),
--   _round_size (a constant).
-- Tables: reads message (message_ready_ix, from the position mark, up to
--   p_take + 1 entries; message_due_ix, from the due mark),
--   messages_delivered_seq, marks_delivered_seq, position_bound_seq, position_mark_seq,
--   due_mark_seq, epoch_at_seq, epoch_previous_bound_seq,
--   epoch_previous_at_seq, epoch_raiser_seq (their last values), the
--   setting lonnymq.due_taken; writes position_mark_seq, due_mark_seq,
--   position_bound_seq, epoch_at_seq, epoch_raiser_seq,
--   epoch_previous_bound_seq, epoch_previous_at_seq, marks_delivered_seq
--   (setval, in this order).
-- Locks: advisory (1819111690, 2), the raise lock, tried exclusively and
--   held until the transaction ends; then (1819111690, the previous epoch's
--   parity) tried exclusively at session level and released at once.  No
--   row locks.
CREATE FUNCTION @extschema@._marks_raise(p_now bigint, p_take integer)
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
    -- The deliveries counted, recorded by the raise (read before its lock:
    -- an older count only lets the next raise come sooner).
    v_delivered bigint := pg_catalog.pg_sequence_last_value('@extschema@.messages_delivered_seq');
    -- (Nothing delivered since the last raise: nothing to move, and the
    -- raise lock is not even tried.)
    v_is_alone boolean := v_delivered <> pg_catalog.pg_sequence_last_value('@extschema@.marks_delivered_seq')
        AND pg_catalog.pg_try_advisory_xact_lock(1819111690, 2);
    v_epoch bigint := pg_catalog.pg_sequence_last_value('@extschema@.position_bound_seq');
    v_mark bigint := pg_catalog.pg_sequence_last_value('@extschema@.position_mark_seq');
    v_due_mark bigint := pg_catalog.pg_sequence_last_value('@extschema@.due_mark_seq');
    v_epoch_at bigint := pg_catalog.pg_sequence_last_value('@extschema@.epoch_at_seq');
    -- (A setting, not a query.)
    v_is_fresh boolean := pg_catalog.current_setting('transaction_isolation') = 'read committed';
    -- The limits: the current epoch's at READ COMMITTED, else the previous one's.
    v_bound bigint := CASE WHEN v_is_fresh THEN v_epoch >> 1 ELSE
        pg_catalog.pg_sequence_last_value('@extschema@.epoch_previous_bound_seq') END;
    v_start bigint := CASE WHEN v_is_fresh THEN v_epoch_at ELSE
        pg_catalog.pg_sequence_last_value('@extschema@.epoch_previous_at_seq') END;
    -- The least due key this transaction took out of the due view
    -- (_due_taken_note), which its rollback would make due again.
    v_due_taken bigint := NULLIF(pg_catalog.current_setting('lonnymq.due_taken', TRUE), '')::bigint;
    v_front bigint;
    v_last bigint;
    v_ready bigint;
    v_first_due bigint;
BEGIN
    -- (Not at READ COMMITTED: the current epoch's raiser ended before this
    -- transaction's snapshot; 0: none known.  Read after the raise lock.)
    IF NOT (v_is_alone AND (v_is_fresh OR @extschema@._xact_seen(
            pg_catalog.pg_sequence_last_value('@extschema@.epoch_raiser_seq')))
        AND pg_catalog.pg_try_advisory_lock(1819111690, (1 - (v_epoch & 1))::integer)) THEN
        RETURN FALSE;
    END IF;
    PERFORM pg_catalog.pg_advisory_unlock(1819111690, (1 - (v_epoch & 1))::integer);
    -- The first ready positions (the caller has taken none): the first, and
    -- the first the caller's take will leave, or the last.
    SELECT pg_catalog.min(h.position), pg_catalog.max(h.position), pg_catalog.count(*) INTO v_front, v_last, v_ready
    FROM (
        SELECT r.position FROM @extschema@.message AS r WHERE r.position >= v_mark ORDER BY r.position LIMIT p_take + 1
    ) AS h;
    -- The first due entry, only below the candidate due mark: the live
    -- entries above it do not matter, and the completed locks up to them
    -- are what the mark is there to skip.
    v_first_due := (
        SELECT GREATEST(d.dequeue_at, d.created_at) FROM @extschema@.message AS d
        WHERE
            GREATEST(d.dequeue_at, d.created_at) >= v_due_mark
            AND GREATEST(d.dequeue_at, d.created_at) < v_start - 100
            AND d.position IS NULL AND NOT d.is_held
        ORDER BY GREATEST(d.dequeue_at, d.created_at) LIMIT 1
    );
    -- In this order (a prefix of it is safe: see the header).  The new
    -- epoch's bound is past what the caller's take may consume (see the
    -- header).
    PERFORM
        pg_catalog.setval('@extschema@.position_mark_seq', GREATEST(v_mark, LEAST(v_front, v_bound))),
        pg_catalog.setval('@extschema@.due_mark_seq', GREATEST(v_due_mark, LEAST(v_start - 100, v_first_due, v_due_taken))),
        pg_catalog.setval('@extschema@.position_bound_seq',
            GREATEST(CASE
                WHEN v_ready > p_take THEN v_last
                WHEN v_ready > 0 THEN v_last + 1
                ELSE (v_epoch >> 1) + @extschema@._round_size()
            END, v_epoch >> 1) * 2 + 1 - (v_epoch & 1)),
        pg_catalog.setval('@extschema@.epoch_at_seq', p_now),
        pg_catalog.setval('@extschema@.epoch_raiser_seq', pg_catalog.pg_current_xact_id()::text::bigint),
        pg_catalog.setval('@extschema@.epoch_previous_bound_seq', v_epoch >> 1),
        pg_catalog.setval('@extschema@.epoch_previous_at_seq', v_epoch_at),
        pg_catalog.setval('@extschema@.marks_delivered_seq', v_delivered);
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@._marks_raise(bigint, integer) IS
'Internal: raise the position and due marks and start a new epoch, when no writer of the previous epoch is in flight and every finished writer is visible to the read; never waits.';

REVOKE ALL ON FUNCTION @extschema@._marks_raise(bigint, integer) FROM PUBLIC;
