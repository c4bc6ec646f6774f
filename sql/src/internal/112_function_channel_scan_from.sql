-- Internal: where a walk of a channel's messages starts, in dequeue_at: its
-- floor (see channel_floor), the lowest floor_at among its rows from the
-- newest raise on, read newest first (so never through the rows that
-- earlier raises deleted); no raise yet: the beginning.  STABLE, so that a
-- scan can use it as an index bound.  PL/pgSQL, not SQL: a SQL function
-- with a sub-select is not inlined, and is parsed and planned again in
-- every transaction that calls it (55 of 221 us of a one-message dequeue,
-- measured); PL/pgSQL keeps the plan for the session.
CREATE FUNCTION @extschema@._channel_scan_from(p_channel_id bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_floor_at bigint;
    v_is_raise boolean;
BEGIN
    -- Usually the newest row is the last raise, and is the floor.
    SELECT f.floor_at, f.is_raise INTO v_floor_at, v_is_raise
    FROM @extschema@.channel_floor AS f
    WHERE f.channel_id = p_channel_id
    ORDER BY f.id DESC
    LIMIT 1;
    IF NOT v_is_raise THEN
        SELECT pg_catalog.min(f.floor_at) INTO v_floor_at
        FROM @extschema@.channel_floor AS f
        WHERE
            f.channel_id = p_channel_id
            AND f.id >= @extschema@._channel_floor_last_raise(p_channel_id);
    END IF;
    RETURN COALESCE(v_floor_at, -9223372036854775808);
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_scan_from(bigint) IS
'Internal: the dequeue_at from which a channel''s messages are walked: its floor, or the beginning before its first raise.';

REVOKE ALL ON FUNCTION @extschema@._channel_scan_from(bigint) FROM PUBLIC;
