-- Internal: complete locked messages, p_ids[k] with fencing token
-- p_num_attempts[k], on behalf of p_caller; the one completion of
-- message_complete, message_complete_batch and message_complete_dequeue.
-- Returns the ids completed; a pair with a stale token, a message that is
-- not locked or is locked by another role is skipped (changes nothing),
-- and with p_report each id not completed is a NOTICE with SQLSTATE 01LQ1
-- and the id and token in its detail (message_complete_dequeue: a worker
-- can log it; its result has no room for it, and a transaction-local
-- setting would be lost under autocommit).
--
-- Set-based, three statements for a batch of unconstrained channels: the
-- batch's channels (one primary-key probe per message), one DELETE (one
-- per pair: the pairs drive the join), and the counters (_channel_release,
-- which locks and writes only limited channels).  The limited channels'
-- rows are locked first, in id order (channel rows before message rows, as
-- everywhere); channels that retain history get their copies in
-- message_history; keyed messages release their keys.
CREATE FUNCTION @extschema@._message_complete_set(
    p_ids bigint[],
    p_num_attempts integer[],
    p_caller pg_catalog.regrole,
    p_report boolean DEFAULT FALSE
)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_now bigint;
    v_limited bigint[];
    v_history bigint[];
    v_gone_ids bigint[];
    v_channels bigint[];
    v_keys text[];
    v_window bigint;
BEGIN
    -- One expression for valid input; _check_pairs says what is wrong.
    IF p_ids IS NULL OR p_num_attempts IS NULL
        OR pg_catalog.cardinality(p_ids) <> pg_catalog.cardinality(p_num_attempts)
        OR pg_catalog.cardinality(p_ids) > 10000
        OR pg_catalog.array_ndims(p_ids) > 1 OR pg_catalog.array_ndims(p_num_attempts) > 1
        OR pg_catalog.array_position(p_ids, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_num_attempts, NULL) IS NOT NULL THEN
        PERFORM @extschema@._check_pairs(p_ids, p_num_attempts);
    END IF;
    IF pg_catalog.cardinality(p_ids) = 0 THEN
        RETURN '{}';
    END IF;
    v_now := @extschema@._clock_ms();

    SELECT
        pg_catalog.array_agg(c.id) FILTER (WHERE c.max_concurrency IS NOT NULL OR c.max_size IS NOT NULL),
        pg_catalog.array_agg(c.id) FILTER (WHERE c.retain_history)
    INTO v_limited, v_history
    FROM @extschema@.channel AS c
    WHERE c.id = ANY(ARRAY(SELECT m.channel_id FROM @extschema@.message AS m WHERE m.id = ANY(p_ids)));
    IF v_limited IS NOT NULL THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = ANY(v_limited)
        ORDER BY c.id
        FOR NO KEY UPDATE OF c;
    END IF;

    -- Channels that retain history get their copies first, from the rows
    -- locked here and deleted below (nothing can change them in between).
    IF v_history IS NOT NULL THEN
        INSERT INTO @extschema@.message_history (
            id, channel, key, content, state, num_attempts, created_at, completed_at
        )
        SELECT m.id, c.name, m.key, m.content, m.state, m.num_attempts, m.created_at, v_now
        FROM
            ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)) AS t (id, num_attempts)
        INNER JOIN @extschema@.message AS m ON m.id = t.id
        INNER JOIN @extschema@.channel AS c ON c.id = m.channel_id
        WHERE
            m.num_attempts = t.num_attempts
            AND m.is_locked
            AND COALESCE(m.locked_by = p_caller, TRUE)
            AND m.channel_id = ANY(v_history)
        FOR UPDATE OF m;
    END IF;

    -- One primary-key probe per (id, token) pair, the pairs driving the
    -- join.  (Not "m.id = ANY(p_ids)" besides: the planner then scanned the
    -- messages first and rescanned every pair for each of them, n x n
    -- comparisons.)
    WITH gone AS (
        DELETE FROM @extschema@.message AS m
        USING ROWS FROM (
            pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)
        ) AS t (id, num_attempts)
        WHERE
            m.id = t.id
            AND m.num_attempts = t.num_attempts
            AND m.is_locked
            AND COALESCE(m.locked_by = p_caller, TRUE)
        RETURNING m.id, m.channel_id, m.key
    )

    SELECT pg_catalog.array_agg(g.id), pg_catalog.array_agg(g.channel_id), pg_catalog.array_agg(g.key)
    INTO v_gone_ids, v_channels, v_keys
    FROM gone AS g;

    -- Keys: each keyed message's claim lasts its channel's dedup window.
    FOR i IN 1..COALESCE(pg_catalog.cardinality(v_keys), 0) LOOP
        CONTINUE WHEN v_keys[i] IS NULL;
        SELECT c.dedup_window_ms INTO v_window
        FROM @extschema@.channel AS c
        WHERE c.id = v_channels[i];
        PERFORM @extschema@._message_key_release(v_channels[i], v_keys[i], v_gone_ids[i], v_window, v_now);
    END LOOP;

    IF v_gone_ids IS NOT NULL THEN
        PERFORM @extschema@._channel_release(v_channels, TRUE, v_now);
    END IF;
    -- Looked for only when fewer were completed than asked (n x k
    -- comparisons then), not on every batch.
    FOR i IN 1..CASE
        WHEN p_report AND COALESCE(pg_catalog.cardinality(v_gone_ids), 0) < pg_catalog.cardinality(p_ids)
            THEN pg_catalog.cardinality(p_ids)
        ELSE 0
    END LOOP
        CONTINUE WHEN p_ids[i] = ANY(v_gone_ids);
        RAISE NOTICE 'lonnymq: message % was not completed: stale token, not locked, or locked by another role', p_ids[i]
            USING ERRCODE = '01LQ1', DETAIL = pg_catalog.format('id=%s num_attempts=%s', p_ids[i], p_num_attempts[i]);
    END LOOP;
    RETURN COALESCE(v_gone_ids, '{}');
END;
$$;

COMMENT ON FUNCTION @extschema@._message_complete_set(bigint[], integer[], pg_catalog.regrole, boolean) IS
'Internal: complete locked messages (p_ids[k] with token p_num_attempts[k]) held by p_caller or by no role; returns the ids completed (p_report: a NOTICE for each one not).';

REVOKE ALL ON FUNCTION @extschema@._message_complete_set(bigint[], integer[], pg_catalog.regrole, boolean) FROM PUBLIC;
