-- Internal: one ended parent less for each (p_children[k], p_buckets[k]):
-- the collected count-down of everything a call resolves, in one lock
-- order, so that two calls never hold each other's rows
-- (doc/workflows-design.md, section 4: with two count-downs in one
-- transaction the prototype deadlocked 596 times in 3 runs):
--   1. the buckets (0 and up), locked in (child, bucket) order, each counted
--      down by its pairs; a bucket at zero is deleted and counts as one
--      pair on its child's own count;
--   2. the children's own counts (bucket -1), locked in child order; one at
--      zero is deleted, and its child released:
--   3. the released children's rows, locked in id order: dequeue_at becomes
--      their own (dequeue_at - _waiting_dequeue_at(0)), or the clock, read
--      after entering the epoch, if later (so its key in message_due_ix is
--      not behind the due mark); the next promotion places or holds them
--      like any due message.
-- A child that no longer waits (cancelled, dead, dropped: a stale edge) has
-- no count left, and changes nothing.
-- Parameters: p_children, p_buckets: one pair per edge resolved (a child
--   repeated counts that many).
-- Returns: how many children were released.
-- Calls: _waiting_dequeue_at (a constant), _epoch_enter, _clock_ms.
-- Tables: reads message_wait (by its key), message (the released children,
--   by message_pkey); writes message_wait (update, delete), message (update
--   of the released children).
-- Locks: the buckets, then the children's own counts, then the released
--   children's message rows, FOR NO KEY UPDATE in that order, until the
--   transaction ends (waited for: the caller bounds the wait,
--   _message_release_run); the epoch's parity (1819111690) shared until the
--   transaction ends (_epoch_enter).
CREATE FUNCTION @extschema@._message_waits_count_down(p_children bigint[], p_buckets integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_tops bigint[];
    v_has_buckets boolean;
    v_rows bigint[];
    v_row_buckets integer[];
    v_counts integer[];
    v_released bigint[];
    v_clock bigint;
BEGIN
    SELECT pg_catalog.array_agg(p.child) FILTER (WHERE p.bucket = -1), pg_catalog.bool_or(p.bucket >= 0)
    INTO v_tops, v_has_buckets
    FROM ROWS FROM (pg_catalog.unnest(p_children), pg_catalog.unnest(p_buckets)) AS p (child, bucket);
    -- 1., then 2.
    FOR i IN 1..2 LOOP
        CONTINUE WHEN i = 1 AND NOT v_has_buckets;
        EXIT WHEN i = 2 AND v_tops IS NULL;
        -- The rows and their pairs, in key order.
        SELECT
            pg_catalog.array_agg(p.child ORDER BY p.child, p.bucket), pg_catalog.array_agg(p.bucket ORDER BY p.child, p.bucket),
            pg_catalog.array_agg(p.n ORDER BY p.child, p.bucket)
        INTO v_rows, v_row_buckets, v_counts
        FROM (
            SELECT p.child, p.bucket, pg_catalog.count(*)::integer AS n
            FROM ROWS FROM (pg_catalog.unnest(p_children), pg_catalog.unnest(p_buckets)) AS p (child, bucket)
            WHERE i = 1 AND p.bucket >= 0
            GROUP BY p.child, p.bucket
            UNION ALL
            SELECT t.child, -1, pg_catalog.count(*)::integer
            FROM pg_catalog.unnest(v_tops) AS t (child)
            WHERE i = 2
            GROUP BY t.child
        ) AS p;
        -- Locked in key order first, in a statement of their own: the
        -- UPDATE below then reads, with a snapshot taken after the locks,
        -- the versions it writes (an UPDATE joined to a locking sub-select
        -- of its own table lost some of its rows to concurrent updates: the
        -- DAG test stranded 135 of 4,000 messages).
        PERFORM 1
        FROM @extschema@.message_wait AS w
        INNER JOIN ROWS FROM (pg_catalog.unnest(v_rows), pg_catalog.unnest(v_row_buckets)) AS k (child, bucket)
            ON w.child_id = k.child AND w.bucket = k.bucket
        WHERE w.child_id = ANY(v_rows)
        ORDER BY w.child_id, w.bucket
        FOR NO KEY UPDATE OF w;
        WITH counted AS (
            UPDATE @extschema@.message_wait AS w
            SET num_waiting = w.num_waiting - k.n
            FROM ROWS FROM (
                pg_catalog.unnest(v_rows), pg_catalog.unnest(v_row_buckets), pg_catalog.unnest(v_counts)
            ) AS k (child, bucket, n)
            WHERE w.child_id = ANY(v_rows) AND w.child_id = k.child AND w.bucket = k.bucket
            RETURNING w.child_id, w.num_waiting
        )

        SELECT pg_catalog.array_agg(c.child_id) FILTER (WHERE c.num_waiting <= 0)
        INTO v_released
        FROM counted AS c;
        IF v_released IS NOT NULL THEN
            DELETE FROM @extschema@.message_wait AS w
            WHERE w.child_id = ANY(v_released) AND w.num_waiting <= 0 AND (w.bucket >= 0) = (i = 1);
            -- (A bucket at zero: one pair on its child's own count.)
            IF i = 1 THEN
                v_tops := COALESCE(v_tops, '{}') || v_released;
                v_released := NULL;
            END IF;
        END IF;
    END LOOP;
    IF v_released IS NULL THEN
        RETURN 0;
    END IF;
    -- 3.  (The same: locked in id order, then updated.)
    PERFORM @extschema@._epoch_enter();
    v_clock := @extschema@._clock_ms();
    PERFORM 1
    FROM @extschema@.message AS m
    WHERE m.id = ANY(v_released) AND m.schedule IS NULL
    ORDER BY m.id
    FOR NO KEY UPDATE;
    UPDATE @extschema@.message AS m
    SET dequeue_at = GREATEST(m.dequeue_at - @extschema@._waiting_dequeue_at(0), v_clock)
    WHERE m.id = ANY(v_released) AND m.schedule IS NULL;
    RETURN pg_catalog.cardinality(v_released);
END;
$$;

COMMENT ON FUNCTION @extschema@._message_waits_count_down(bigint[], integer[]) IS
'Internal: count down the waiting messages (their buckets, then their own counts) of the edges a call resolved, in one lock order; release those at zero.';

REVOKE ALL ON FUNCTION @extschema@._message_waits_count_down(bigint[], integer[]) FROM PUBLIC;
