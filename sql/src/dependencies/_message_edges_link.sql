-- Internal: make every message of p_children wait for every id of
-- p_parents (locked and flagged by _message_after): one message_edge row
-- per pair, and per child its message_wait rows: its own count (bucket
-- -1, with its parents and mode) and, for more than 64 parents,
-- ceil(N / 64) buckets, a parent's bucket being its ordinal in id order
-- modulo that number (doc/workflows-design.md, "A2h": neighbouring parents,
-- which end at about the same time, count down different rows).  An edge
-- or a count left by an earlier life of the same child (a dead letter
-- redriven with its id, waiting again) is overwritten.  The caller gives
-- the children their waiting dequeue_at (_waiting_dequeue_at).
-- Parameters: p_children, the waiting messages' ids; p_parents, the
--   parents' ids, distinct, in id order; p_after_mode, 'completed' or
--   'ended'.
-- Returns: nothing.
-- Calls: none.
-- Tables: writes message_edge, message_wait (inserts, or updates of an
--   earlier life's).
-- Locks: the rows it writes.
CREATE FUNCTION @extschema@._message_edges_link(p_children bigint[], p_parents bigint[], p_after_mode text)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_n integer := pg_catalog.cardinality(p_parents);
    v_buckets integer := (pg_catalog.cardinality(p_parents) + 63) / 64;
BEGIN
    INSERT INTO @extschema@.message_edge AS e (parent_id, child_id, bucket)
    SELECT p.id, c.id, CASE WHEN v_buckets > 1 THEN ((p.i - 1) % v_buckets)::integer ELSE -1 END
    FROM ROWS FROM (pg_catalog.unnest(p_parents)) WITH ORDINALITY AS p (id, i)
    CROSS JOIN pg_catalog.unnest(p_children) AS c (id)
    ORDER BY p.id, c.id
    ON CONFLICT (parent_id, child_id) DO UPDATE SET bucket = excluded.bucket;
    INSERT INTO @extschema@.message_wait AS w (child_id, bucket, num_waiting, after, after_mode)
    SELECT
        c.id, b.b,
        CASE WHEN b.b = -1 THEN CASE WHEN v_buckets > 1 THEN v_buckets ELSE v_n END
        ELSE (v_n - b.b + v_buckets - 1) / v_buckets END,
        CASE WHEN b.b = -1 THEN p_parents END, CASE WHEN b.b = -1 THEN p_after_mode END
    FROM pg_catalog.unnest(p_children) AS c (id)
    CROSS JOIN pg_catalog.generate_series(-1, CASE WHEN v_buckets > 1 THEN v_buckets - 1 ELSE -1 END) AS b (b)
    ORDER BY c.id, b.b
    ON CONFLICT (child_id, bucket) DO UPDATE
        SET num_waiting = excluded.num_waiting, after = excluded.after, after_mode = excluded.after_mode;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_edges_link(bigint[], bigint[], text) IS
'Internal: make messages wait for parents (edges, their own count, and bucket counts beyond 64 parents).';

REVOKE ALL ON FUNCTION @extschema@._message_edges_link(bigint[], bigint[], text) FROM PUBLIC;
