-- Complete many locked messages with one call: p_ids[k] with fencing token
-- p_num_attempts[k].  Returns how many were completed; a stale token or a
-- message that is not locked is skipped (as message_complete's false).
-- Set-based: the limited channels' rows are locked first, in id order (lock
-- order, as everywhere: channel rows before message rows), then one DELETE
-- removes the messages (copying them to message_history for channels that
-- retain it), keyed messages release their keys, and each channel's
-- counters are updated once.  About two primary-key probes per message.
-- Hash joins stay on here (off in the other hot functions): the DELETE joins
-- the batch's arrays to the rows found by primary key, both bounded by the
-- batch; a nested loop would compare every pair.
CREATE FUNCTION @extschema@.message_complete_batch(
    p_ids bigint[],
    p_num_attempts integer[]
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_hashjoin = on
AS $$
DECLARE
    v_now bigint;
    v_done integer := 0;
    v_count record;
    v_channel_ids bigint[];
    v_history_ids bigint[];
    v_gone_ids bigint[];
    v_gone_channels bigint[];
    v_gone_keys text[];
    v_window bigint;
    i integer;
    -- Evaluated once, not once per pair.
    v_caller pg_catalog.regrole := @extschema@._caller_role();
BEGIN
    IF p_ids IS NULL OR p_num_attempts IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_ids and p_num_attempts must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.cardinality(p_ids) <> pg_catalog.cardinality(p_num_attempts) THEN
        RAISE EXCEPTION 'lonnymq: p_ids has % elements but p_num_attempts has %',
            pg_catalog.cardinality(p_ids), pg_catalog.cardinality(p_num_attempts)
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.cardinality(p_ids) = 0 THEN
        RETURN 0;
    END IF;
    IF pg_catalog.array_ndims(p_ids) <> 1 OR pg_catalog.array_ndims(p_num_attempts) <> 1 THEN
        RAISE EXCEPTION 'lonnymq: p_ids and p_num_attempts must be one-dimensional arrays'
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'lonnymq: a batch holds at most 10000 messages, got %', pg_catalog.cardinality(p_ids)
            USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.array_position(p_ids, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_num_attempts, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'lonnymq: p_ids and p_num_attempts must not contain NULL'
            USING ERRCODE = '22004';
    END IF;
    v_now := @extschema@._clock_ms();

    -- The batch's channels (one primary-key probe per message); limited
    -- ones are locked, in id order, before any message row.
    SELECT pg_catalog.array_agg(DISTINCT m.channel_id) INTO v_channel_ids
    FROM @extschema@.message AS m
    WHERE m.id = ANY(p_ids);
    IF v_channel_ids IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM 1
    FROM @extschema@.channel AS c
    WHERE
        c.id = ANY(v_channel_ids)
        AND (c.max_concurrency IS NOT NULL OR c.max_size IS NOT NULL)
    ORDER BY c.id
    FOR NO KEY UPDATE OF c;
    SELECT pg_catalog.array_agg(c.id) FILTER (WHERE c.retain_history) INTO v_history_ids
    FROM @extschema@.channel AS c
    WHERE c.id = ANY(v_channel_ids);

    -- One DELETE: one primary-key probe per (id, token) pair, the pairs
    -- driving the join.  (Not "m.id = ANY(p_ids)" besides: the planner then
    -- scanned the messages first and rescanned every pair for each of them,
    -- n x n comparisons.)  The rows of channels that retain history are
    -- copied (none when v_history_ids is NULL).
    WITH gone AS (
        DELETE FROM @extschema@.message AS m
        USING ROWS FROM (
            pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)
        ) AS t (id, num_attempts)
        WHERE
            m.id = t.id
            AND m.num_attempts = t.num_attempts
            AND m.is_locked
            AND COALESCE(m.locked_by = v_caller, TRUE)
        RETURNING m.id, m.channel_id, m.key, m.content, m.state, m.num_attempts, m.created_at
    ),

    kept AS (
        INSERT INTO @extschema@.message_history (
            id, channel, key, content, state, num_attempts, created_at, completed_at
        )
        SELECT
            g.id, c.name, g.key, g.content, g.state, g.num_attempts, g.created_at, v_now
        FROM gone AS g
        INNER JOIN @extschema@.channel AS c ON c.id = g.channel_id
        WHERE g.channel_id = ANY(v_history_ids)
    )

    SELECT
        pg_catalog.array_agg(g.id),
        pg_catalog.array_agg(g.channel_id),
        pg_catalog.array_agg(g.key)
    INTO v_gone_ids, v_gone_channels, v_gone_keys
    FROM gone AS g;
    IF v_gone_ids IS NULL THEN
        RETURN 0;
    END IF;

    -- Keys: each keyed message's claim lasts its channel's dedup window.
    FOR i IN 1..pg_catalog.cardinality(v_gone_ids) LOOP
        CONTINUE WHEN v_gone_keys[i] IS NULL;
        SELECT c.dedup_window_ms INTO v_window
        FROM @extschema@.channel AS c
        WHERE c.id = v_gone_channels[i];
        PERFORM @extschema@._message_key_release(
            v_gone_channels[i], v_gone_keys[i], v_gone_ids[i], v_window, v_now
        );
    END LOOP;

    -- Counters, once per channel.
    FOR v_count IN
        SELECT g.channel_id, pg_catalog.count(*)::integer AS n
        FROM pg_catalog.unnest(v_gone_channels) AS g (channel_id)
        GROUP BY g.channel_id
        ORDER BY g.channel_id
    LOOP
        v_done := v_done + v_count.n;
        PERFORM @extschema@._channel_release(v_count.channel_id, v_count.n, TRUE, v_now);
    END LOOP;
    RETURN v_done;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_complete_batch(bigint[], integer[]) IS
'Complete many locked messages: p_ids[k] with fencing token p_num_attempts[k]. Returns how many were completed (stale tokens and unlocked messages are skipped). Array lengths must match (22023).';

REVOKE ALL ON FUNCTION @extschema@.message_complete_batch(bigint[], integer[]) FROM PUBLIC;
