-- Internal: locked messages left their locks (completed, deferred, failed,
-- dead-lettered; p_removed: they left their channels), one in channel
-- p_channel_ids[k] for each k.  The rows are locked in id order, as
-- everywhere (the index scan of "= ANY" visits the ids sorted).  A
-- limited channel's count is found in the array (array_positions): n x k
-- comparisons for n messages in k limited channels, which keeps the
-- statement to two plan nodes.  Touches a channel row only when a limit needs it:
-- max_concurrency (fewer locked; a saturated channel rejoins the rotation)
-- or max_size with a removal.  For unconstrained channels the UPDATE
-- matches no row, takes no lock and writes nothing.  It runs after the
-- caller's change, with a fresh snapshot, so a limit that channel_set
-- committed meanwhile is seen (channel_set counted those locks).
-- PL/pgSQL rather than SQL so that its plan is cached: a SQL function called
-- from PL/pgSQL is planned again on every call.
CREATE FUNCTION @extschema@._channel_release(
    p_channel_ids bigint[],
    p_removed boolean,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    UPDATE @extschema@.channel AS c
    SET
        num_locked = CASE
            WHEN c.max_concurrency IS NULL THEN c.num_locked
            ELSE pg_catalog.int4larger(
                c.num_locked - pg_catalog.cardinality(pg_catalog.array_positions(p_channel_ids, c.id)), 0
            )
        END,
        num_removed = c.num_removed + CASE
            WHEN p_removed AND c.max_size IS NOT NULL
                THEN pg_catalog.cardinality(pg_catalog.array_positions(p_channel_ids, c.id))
            ELSE 0
        END,
        next_at = CASE
            WHEN c.num_locked >= c.max_concurrency AND c.next_at IS NOT NULL
                THEN LEAST(
                    c.next_at,
                    GREATEST(
                        p_now,
                        COALESCE(c.last_served_at + c.release_interval_ms, p_now)
                    )
                )
            ELSE c.next_at
        END,
        turn = CASE
            WHEN c.num_locked >= c.max_concurrency AND c.next_at IS NOT NULL
                THEN pg_catalog.nextval('@extschema@.channel_turn_seq')
            ELSE c.turn
        END
    WHERE
        c.id = ANY(p_channel_ids)
        AND (
            c.max_concurrency IS NOT NULL
            OR (p_removed AND c.max_size IS NOT NULL)
        );
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_release(bigint[], boolean, bigint) IS
'Internal: account for messages leaving their locks, on channels whose limits need it.';

REVOKE ALL ON FUNCTION @extschema@._channel_release(bigint[], boolean, bigint) FROM PUBLIC;
