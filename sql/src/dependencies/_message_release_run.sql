-- Internal: a promotion's turn of a release row (_message_release): the
-- ended parent p_id's next edges after p_cursor are resolved
-- (_message_waits_resolve); the row goes when none is left, else it keeps
-- the new cursor and stays due, for the next promotion.  A promotion never
-- waits, and its transaction may already have counted down children (its
-- completion's): two count-downs in one transaction that both wait can
-- deadlock.  So this one waits at most 10 ms for any lock (lock_timeout,
-- in a subtransaction): past that, everything it did is undone and the
-- row is due again later, 10 ms doubling up to a second (num_attempts
-- counts its tries, as a wake's).
-- Parameters: p_id, the release row's id (the parent's); p_cursor, the last
--   child resolved; p_outcome, the parent's end.
-- Returns: nothing.
-- Calls: _message_waits_resolve, _clock_ms.
-- Tables: writes message (the release row: updated or deleted); the rest
--   through _message_waits_resolve.
-- Locks: the release row (its promotion holds it FOR UPDATE); its callees',
--   each waited for at most 10 ms.
CREATE FUNCTION @extschema@._message_release_run(p_id bigint, p_cursor bigint, p_outcome text)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_lock_timeout text := pg_catalog.current_setting('lock_timeout');
    v_left record;
BEGIN
    BEGIN
        PERFORM pg_catalog.set_config('lock_timeout', '10ms', TRUE);
        SELECT r.parent_id, r.cursor INTO v_left
        FROM @extschema@._message_waits_resolve(ARRAY[p_id], ARRAY[p_cursor], p_outcome) AS r;
        PERFORM pg_catalog.set_config('lock_timeout', v_lock_timeout, TRUE);
        IF v_left.parent_id IS NULL THEN
            DELETE FROM @extschema@.message AS m WHERE m.id = p_id AND m.schedule = '';
        ELSE
            UPDATE @extschema@.message AS m
            SET state = pg_catalog.convert_to(v_left.cursor::text, 'UTF8'), num_attempts = 0
            WHERE m.id = p_id AND m.schedule = '';
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        -- (The subtransaction's writes and setting are undone.)
        UPDATE @extschema@.message AS m
        SET
            num_attempts = m.num_attempts + 1,
            dequeue_at = @extschema@._clock_ms() + LEAST(10 << LEAST(m.num_attempts, 7), 1000)
        WHERE m.id = p_id AND m.schedule = '';
    END;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_release_run(bigint, bigint, text) IS
'Internal: resolve the next dependents of an ended message from its release row, waiting at most 10 ms for any lock; the row goes when none is left.';

REVOKE ALL ON FUNCTION @extschema@._message_release_run(bigint, bigint, text) FROM PUBLIC;
