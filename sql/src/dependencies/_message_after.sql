-- Internal: the parents a new message waits for, from a producer's p_after
-- (doc/dependencies.md): each id is classified once, under locks that keep
-- it so until the producer's transaction ends:
--   in the queue (a message row, waiting, scheduled, ready or locked): it
--     is waited for.  Locked FOR KEY SHARE, in id order, until the
--     transaction ends: a completion's, bury's or cancel's DELETE of it
--     waits for this producer, then reads has_dependents, which this call
--     sets (once; a parent that has it already is only locked, so that a
--     fan-out created in many transactions adds no version to its row), and,
--     in its next statement, the edges this producer wrote.  A worker's take
--     of it is not blocked by the share lock (FOR NO KEY UPDATE), only by
--     the flag's update, until this transaction ends (SKIP LOCKED);
--   a dead letter (found after the lock: a parent dead-lettered while this
--     call waited for its lock is one): with the mode 'completed', the new
--     message goes to the dead letters at once (dead_parent, the least such
--     id); with 'ended', done;
--   neither (completed, cancelled, its history pruned; a release row of its
--     id: it ended): done.
-- Parameters: p_after, the ids, checked by the caller (_check_after: none
--   is a schedule's pending occurrence); p_after_mode, NULL or 'completed'
--   (a dead parent ends the dependent) or 'ended'.
-- Returns: one row: parents, the ids waited for in id order (NULL: none);
--   dead_parent, a dead letter that ends the new message (NULL: none).
-- Calls: none.
-- Tables: reads message (message_pkey), dead_letter (dead_letter_pkey);
--   writes message (has_dependents of the parents without it).
-- Locks: the parents' message rows FOR KEY SHARE, in id order, and those it
--   flags FOR NO KEY UPDATE (their update), until the transaction ends.
--   Under REPEATABLE READ or SERIALIZABLE, a parent completed after the
--   transaction's snapshot raises 40001 (to retry).
CREATE FUNCTION @extschema@._message_after(p_after bigint[], p_after_mode text)
RETURNS TABLE (parents bigint[], dead_parent bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_parents bigint[];
    v_unflagged bigint[];
    v_dead bigint;
BEGIN
    SELECT
        pg_catalog.array_agg(l.id ORDER BY l.id),
        pg_catalog.array_agg(l.id ORDER BY l.id) FILTER (WHERE NOT l.has_dependents)
    INTO v_parents, v_unflagged
    FROM (
        SELECT m.id, m.has_dependents
        FROM @extschema@.message AS m
        -- (A release row, schedule '', is a parent that ended; a pending
        -- occurrence was refused by _check_after.)
        WHERE m.id = ANY(p_after) AND m.schedule IS NULL
        ORDER BY m.id
        FOR KEY SHARE
    ) AS l;
    IF COALESCE(p_after_mode, 'completed') = 'completed' THEN
        SELECT pg_catalog.min(d.id) INTO v_dead
        FROM @extschema@.dead_letter AS d
        WHERE d.id = ANY(p_after) AND d.id <> ALL(COALESCE(v_parents, '{}'));
        IF v_dead IS NOT NULL THEN
            RETURN QUERY SELECT NULL::bigint[], v_dead;
            RETURN;
        END IF;
    END IF;
    IF v_unflagged IS NOT NULL THEN
        UPDATE @extschema@.message AS m
        SET has_dependents = TRUE
        WHERE m.id = ANY(v_unflagged) AND NOT m.has_dependents;
    END IF;
    RETURN QUERY SELECT v_parents, NULL::bigint;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_after(bigint[], text) IS
'Internal: lock and flag the parents a new message waits for; returns them, or the dead letter that ends it at once.';

REVOKE ALL ON FUNCTION @extschema@._message_after(bigint[], text) FROM PUBLIC;
