-- Internal: resolve the dependents of ended messages: for each parent
-- p_parents[k], its edges after child p_cursors[k], at most
-- _release_batch_size of them, in child order, are deleted and resolved:
--   p_outcome 'completed': one parent less for each child;
--   'dead', 'cancelled': one parent less for a child whose after_mode is
--     'ended'; any other child still waiting ends the same way
--     (_message_dependent_end: a dead letter naming the parent, or
--     cancelled), and its own dependents after it, through its release row.
-- The count-downs of all the parents are collected into one
-- (_message_waits_count_down), taken in one lock order.  A parent with
-- more edges is returned with the last child resolved, for its release row.
-- Parameters: p_parents, the ended messages; p_cursors, for each the last
--   child already resolved (0: none); p_outcome, how they ended.
-- Returns: a row per parent with edges left: parent_id, and cursor, the last
--   child resolved.
-- Calls: _release_batch_size (a constant), _message_waits_count_down,
--   _message_dependent_end, _clock_ms.
-- Tables: reads message_edge (a parent's next edges, by
--   message_edge_pkey), message_wait (the children's modes, for 'dead' and
--   'cancelled', by its key); writes message_edge (deletes the edges
--   resolved) (message and message_wait through the callees).
-- Locks: the edges it deletes; its callees' (_message_waits_count_down:
--   buckets, then children; _message_dependent_end: a child's channel, then
--   its row).
CREATE FUNCTION @extschema@._message_waits_resolve(p_parents bigint[], p_cursors bigint[], p_outcome text)
RETURNS TABLE (parent_id bigint, cursor bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_children bigint[] := '{}';
    v_buckets integer[] := '{}';
    v_parent_of bigint[] := '{}';
    v_resolved record;
    v_split record;
    v_now bigint;
BEGIN
    FOR i IN 1..pg_catalog.cardinality(p_parents) LOOP
        -- The first edges after the cursor (one more: whether any is left),
        -- then those deleted by primary key ("= ANY").
        WITH next_edges AS MATERIALIZED (
            SELECT e.child_id
            FROM @extschema@.message_edge AS e
            WHERE e.parent_id = p_parents[i] AND e.child_id > p_cursors[i]
            ORDER BY e.child_id
            LIMIT @extschema@._release_batch_size() + 1
        ),

        resolved AS (
            DELETE FROM @extschema@.message_edge AS e
            WHERE
                e.parent_id = p_parents[i]
                AND e.child_id = ANY(ARRAY(
                    SELECT n.child_id FROM next_edges AS n ORDER BY n.child_id LIMIT @extschema@._release_batch_size()
                ))
            RETURNING e.child_id, e.bucket
        )

        SELECT
            pg_catalog.array_agg(r.child_id ORDER BY r.child_id) AS children,
            pg_catalog.array_agg(r.bucket ORDER BY r.child_id) AS buckets,
            (SELECT pg_catalog.count(*) FROM next_edges) > @extschema@._release_batch_size() AS has_more,
            pg_catalog.max(r.child_id) AS last_child
        INTO v_resolved
        FROM resolved AS r;
        IF v_resolved.children IS NOT NULL THEN
            v_children := v_children || v_resolved.children;
            v_buckets := v_buckets || v_resolved.buckets;
            v_parent_of := v_parent_of || pg_catalog.array_fill(p_parents[i], ARRAY[pg_catalog.cardinality(v_resolved.children)]);
        END IF;
        IF v_resolved.has_more THEN
            parent_id := p_parents[i];
            cursor := v_resolved.last_child;
            RETURN NEXT;
        END IF;
    END LOOP;
    IF pg_catalog.cardinality(v_children) = 0 THEN
        RETURN;
    END IF;
    IF p_outcome = 'completed' THEN
        PERFORM @extschema@._message_waits_count_down(v_children, v_buckets);
        RETURN;
    END IF;
    -- A dead or cancelled parent: a child that waits for any end ('ended')
    -- counts it as done, as does one that waits no more (a stale edge: its
    -- count is gone, nothing changes); any other ends too, once (the least
    -- parent names the cause).  (Read without a lock: _message_dependent_end
    -- reads it again under its row lock.)
    SELECT
        pg_catalog.array_agg(p.child) FILTER (WHERE NOT p.ends) AS counted_children,
        pg_catalog.array_agg(p.bucket) FILTER (WHERE NOT p.ends) AS counted_buckets,
        pg_catalog.array_agg(p.child ORDER BY p.child, p.parent) FILTER (WHERE p.ends) AS ending_children,
        pg_catalog.array_agg(p.parent ORDER BY p.child, p.parent) FILTER (WHERE p.ends) AS ending_parents
    INTO v_split
    FROM (
        SELECT
            e.child, e.bucket, e.parent,
            COALESCE((
                SELECT w.after_mode IS DISTINCT FROM 'ended' FROM @extschema@.message_wait AS w
                WHERE w.child_id = e.child AND w.bucket = -1
            ), FALSE) AS ends
        FROM ROWS FROM (
            pg_catalog.unnest(v_children), pg_catalog.unnest(v_buckets), pg_catalog.unnest(v_parent_of)
        ) AS e (child, bucket, parent)
    ) AS p;
    IF v_split.counted_children IS NOT NULL THEN
        PERFORM @extschema@._message_waits_count_down(v_split.counted_children, v_split.counted_buckets);
    END IF;
    IF v_split.ending_children IS NOT NULL THEN
        v_now := @extschema@._clock_ms();
        FOR i IN 1..pg_catalog.cardinality(v_split.ending_children) LOOP
            -- (Sorted by child: each child once, with its least parent.)
            CONTINUE WHEN i > 1 AND v_split.ending_children[i] = v_split.ending_children[i - 1];
            PERFORM @extschema@._message_dependent_end(v_split.ending_children[i], v_split.ending_parents[i], p_outcome, v_now);
        END LOOP;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_waits_resolve(bigint[], bigint[], text) IS
'Internal: resolve up to 100 dependents of each ended parent from its cursor (count down, or end them with a dead or cancelled parent); returns the parents with dependents left.';

REVOKE ALL ON FUNCTION @extschema@._message_waits_resolve(bigint[], bigint[], text) FROM PUBLIC;
