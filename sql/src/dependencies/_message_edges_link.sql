-- Internal: make every message of p_children wait for every id of
-- p_parents (locked and flagged by _message_after): one message_edge row
-- per pair and, for more than 64 parents, ceil(N / 64) message_wait_bucket
-- rows per child, a parent's bucket being its ordinal in id order modulo
-- that number (doc/workflows-design.md, "A2h": neighbouring parents, which
-- end at about the same time, count down different rows).  An edge or a
-- bucket left by an earlier life of the same child (a dead letter redriven
-- with its id, waiting again) is overwritten.
-- Parameters: p_children, the waiting messages' ids; p_parents, the
--   parents' ids, distinct, in id order.
-- Returns: each child's num_waiting: N for N <= 64 parents (counted down
--   by each), else the number of buckets (counted down by each bucket that
--   reaches zero).
-- Calls: none.
-- Tables: writes message_edge, message_wait_bucket (inserts).
-- Locks: the rows it inserts.
CREATE FUNCTION @extschema@._message_edges_link(p_children bigint[], p_parents bigint[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_n integer := pg_catalog.cardinality(p_parents);
    v_buckets integer := (pg_catalog.cardinality(p_parents) + 63) / 64;
BEGIN
    INSERT INTO @extschema@.message_edge AS e (parent_id, child_id, bucket)
    SELECT p.id, c.id, CASE WHEN v_buckets > 1 THEN ((p.i - 1) % v_buckets)::integer END
    FROM ROWS FROM (pg_catalog.unnest(p_parents)) WITH ORDINALITY AS p (id, i)
    CROSS JOIN pg_catalog.unnest(p_children) AS c (id)
    ORDER BY p.id, c.id
    ON CONFLICT (parent_id, child_id) DO UPDATE SET bucket = excluded.bucket;
    IF v_buckets = 1 THEN
        RETURN v_n;
    END IF;
    INSERT INTO @extschema@.message_wait_bucket AS w (child_id, bucket, num_waiting)
    SELECT c.id, b.b, (v_n - b.b + v_buckets - 1) / v_buckets
    FROM pg_catalog.unnest(p_children) AS c (id)
    CROSS JOIN pg_catalog.generate_series(0, v_buckets - 1) AS b (b)
    ORDER BY c.id, b.b
    ON CONFLICT (child_id, bucket) DO UPDATE SET num_waiting = excluded.num_waiting;
    RETURN v_buckets;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_edges_link(bigint[], bigint[]) IS
'Internal: make messages wait for parents (edges, and bucket counters beyond 64 parents); returns their num_waiting.';

REVOKE ALL ON FUNCTION @extschema@._message_edges_link(bigint[], bigint[]) FROM PUBLIC;
