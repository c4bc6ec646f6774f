-- Internal: one ended parent less for each (p_children[k], p_buckets[k]):
-- the collected count-down of everything a call resolves, in one lock
-- order, so that two calls never hold each other's rows
-- (doc/workflows-design.md, section 4: with two count-downs in one
-- transaction the prototype deadlocked 596 times in 3 runs):
--   1. the buckets (bucket not NULL), locked in (child, bucket) order, each
--      counted down by its pairs; a bucket at zero is deleted and counts as
--      one pair on its child;
--   2. the children's own num_waiting, locked in id order, counted down by
--      their pairs; a child at zero is released: its dequeue_at becomes the
--      later of waiting_dequeue_at and the clock, read after entering the
--      epoch (so its key in message_due_ix is not behind the due mark, and
--      the next promotion places or holds it like any due message), and its
--      waiting columns go back to NULL.
-- A child that no longer waits (cancelled, dead, dropped: a stale edge) or
-- a bucket that is gone changes nothing.
-- Parameters: p_children, p_buckets: one pair per edge resolved (a child
--   repeated counts that many).
-- Returns: how many children were released.
-- Calls: _epoch_enter, _clock_ms.
-- Tables: reads message_wait_bucket (the buckets, by their key), message
--   (the children, by message_pkey); writes message_wait_bucket (update,
--   delete), message (update of the waiting children).
-- Locks: the buckets, then the children's message rows, FOR NO KEY UPDATE
--   in that order, until the transaction ends (waited for: the caller
--   bounds the wait, _message_release_run); the epoch's parity
--   (1819111690) shared until the transaction ends (_epoch_enter).
CREATE FUNCTION @extschema@._message_waits_count_down(p_children bigint[], p_buckets integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_tops bigint[];
    v_has_buckets boolean;
    v_emptied bigint[];
    v_clock bigint;
    v_released integer;
BEGIN
    SELECT pg_catalog.array_agg(p.child) FILTER (WHERE p.bucket IS NULL), pg_catalog.bool_or(p.bucket IS NOT NULL)
    INTO v_tops, v_has_buckets
    FROM ROWS FROM (pg_catalog.unnest(p_children), pg_catalog.unnest(p_buckets)) AS p (child, bucket);
    IF v_has_buckets THEN
        -- 1.  (Scalar array probes by shape, then the join by key: the
        -- buckets are locked in key order by the sorted sub-select.)
        WITH pairs AS (
            SELECT p.child, p.bucket, pg_catalog.count(*)::integer AS n
            FROM ROWS FROM (pg_catalog.unnest(p_children), pg_catalog.unnest(p_buckets)) AS p (child, bucket)
            WHERE p.bucket IS NOT NULL
            GROUP BY p.child, p.bucket
        ),

        locked AS (
            SELECT w.child_id, w.bucket, p.n
            FROM @extschema@.message_wait_bucket AS w
            INNER JOIN pairs AS p ON w.child_id = p.child AND w.bucket = p.bucket
            WHERE w.child_id = ANY(p_children)
            ORDER BY w.child_id, w.bucket
            FOR NO KEY UPDATE OF w
        ),

        counted AS (
            UPDATE @extschema@.message_wait_bucket AS w
            SET num_waiting = w.num_waiting - l.n
            FROM locked AS l
            WHERE w.child_id = l.child_id AND w.bucket = l.bucket
            RETURNING w.child_id, w.bucket, w.num_waiting
        )

        SELECT pg_catalog.array_agg(c.child_id) FILTER (WHERE c.num_waiting <= 0)
        INTO v_emptied
        FROM counted AS c;
        IF v_emptied IS NOT NULL THEN
            DELETE FROM @extschema@.message_wait_bucket AS w
            WHERE w.child_id = ANY(v_emptied) AND w.num_waiting <= 0;
            v_tops := COALESCE(v_tops, '{}') || v_emptied;
        END IF;
    END IF;
    IF v_tops IS NULL THEN
        RETURN 0;
    END IF;
    -- 2.
    PERFORM @extschema@._epoch_enter();
    v_clock := @extschema@._clock_ms();
    WITH pairs AS (
        SELECT t.id, pg_catalog.count(*)::integer AS n
        FROM pg_catalog.unnest(v_tops) AS t (id)
        GROUP BY t.id
    ),

    locked AS (
        SELECT m.id, p.n
        FROM @extschema@.message AS m
        INNER JOIN pairs AS p ON m.id = p.id
        WHERE m.id = ANY(v_tops) AND m.num_waiting IS NOT NULL
        ORDER BY m.id
        FOR NO KEY UPDATE OF m
    ),

    counted AS (
        UPDATE @extschema@.message AS m
        SET
            num_waiting = CASE WHEN m.num_waiting > l.n THEN m.num_waiting - l.n END,
            dequeue_at = CASE WHEN m.num_waiting > l.n THEN m.dequeue_at ELSE GREATEST(m.waiting_dequeue_at, v_clock) END,
            waiting_dequeue_at = CASE WHEN m.num_waiting > l.n THEN m.waiting_dequeue_at END,
            after = CASE WHEN m.num_waiting > l.n THEN m.after END,
            after_mode = CASE WHEN m.num_waiting > l.n THEN m.after_mode END
        FROM locked AS l
        WHERE m.id = l.id
        RETURNING m.num_waiting
    )

    SELECT pg_catalog.count(*) FILTER (WHERE c.num_waiting IS NULL) INTO v_released
    FROM counted AS c;
    RETURN v_released;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_waits_count_down(bigint[], integer[]) IS
'Internal: count down the waiting messages (their buckets, then their own count) of the edges a call resolved, in one lock order; release those at zero.';

REVOKE ALL ON FUNCTION @extschema@._message_waits_count_down(bigint[], integer[]) FROM PUBLIC;
