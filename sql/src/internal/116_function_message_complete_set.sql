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
-- Set-based.  For messages of channels without configuration, two
-- statements: the configured channels among the batch's (one primary-key
-- probe per message and one of channel_pkey, which finds nothing), and one
-- DELETE (one probe per pair: the pairs drive the join).  Message rows
-- before channel rows, as a take (which locks its messages, then a release
-- interval's channel row): channels that retain history get their copies
-- in message_history; keyed messages release their keys; admitted messages
-- free their places (_channel_admit, which locks the channel row); max_size
-- channels count the removals (_channel_removed).
-- Calls: _check_pairs, _message_key_release, _channel_removed,
--   _channel_admit.
-- Tables: channel (lock), message (delete), message_history (insert),
--   message_key (update, delete).
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
    v_history bigint[];
    v_sized bigint[];
    v_gone_ids bigint[];
    v_key_channels bigint[];
    v_key_names text[];
    v_keys text[];
    v_key_ids bigint[];
    v_admitted bigint[];
    v_removed bigint[];
    v_channel_id bigint;
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
        pg_catalog.array_agg(c.id) FILTER (WHERE c.retain_history),
        pg_catalog.array_agg(c.id) FILTER (WHERE c.max_size IS NOT NULL)
    INTO v_history, v_sized
    FROM @extschema@.channel AS c
    WHERE c.id = ANY(ARRAY(SELECT m.channel_id FROM @extschema@.message AS m WHERE m.id = ANY(p_ids)));

    -- Channels that retain history get their copies first, from the rows
    -- locked here and deleted below (nothing can change them in between).
    IF v_history IS NOT NULL THEN
        INSERT INTO @extschema@.message_history (
            id, channel, key, content, state, num_attempts, created_at, completed_at
        )
        SELECT m.id, m.channel, m.key, m.content, m.state, m.num_attempts, m.created_at, v_now
        FROM @extschema@.message AS m
        WHERE
            m.id = ANY(p_ids)
            AND m.num_attempts = p_num_attempts[pg_catalog.array_position(p_ids, m.id)]
            AND m.is_locked
            AND COALESCE(m.locked_by = p_caller, TRUE)
            AND m.channel_id = ANY(v_history)
        FOR UPDATE OF m;
    END IF;

    -- By primary key only ("= ANY": an index condition by shape, no join
    -- whose plan could walk message_pkey), each message checked against its
    -- own pair's token (array_position: the first pair of its id; a
    -- repeated id's later pairs are reported as not completed).
    WITH gone AS (
        DELETE FROM @extschema@.message AS m
        WHERE
            m.id = ANY(p_ids)
            AND m.num_attempts = p_num_attempts[pg_catalog.array_position(p_ids, m.id)]
            AND m.is_locked
            AND COALESCE(m.locked_by = p_caller, TRUE)
        RETURNING m.id, m.channel_id, m.channel, m.key, m.is_admitted
    )

    SELECT
        pg_catalog.array_agg(g.id),
        pg_catalog.array_agg(g.channel_id) FILTER (WHERE g.key IS NOT NULL),
        pg_catalog.array_agg(g.channel) FILTER (WHERE g.key IS NOT NULL),
        pg_catalog.array_agg(g.key) FILTER (WHERE g.key IS NOT NULL),
        pg_catalog.array_agg(g.id) FILTER (WHERE g.key IS NOT NULL),
        pg_catalog.array_agg(g.channel_id) FILTER (WHERE g.is_admitted),
        pg_catalog.array_agg(g.channel_id) FILTER (WHERE g.channel_id = ANY(v_sized))
    INTO v_gone_ids, v_key_channels, v_key_names, v_keys, v_key_ids, v_admitted, v_removed
    FROM gone AS g;

    -- Keys: each keyed message's claim lasts its channel's dedup window.
    FOR i IN 1..COALESCE(pg_catalog.cardinality(v_keys), 0) LOOP
        PERFORM @extschema@._message_key_release(
            v_key_channels[i], v_keys[i], v_key_ids[i],
            (@extschema@._channel_config(v_key_channels[i], v_key_names[i])).dedup_window_ms, v_now
        );
    END LOOP;
    IF v_removed IS NOT NULL THEN
        PERFORM @extschema@._channel_removed(v_removed);
    END IF;
    -- Admitted messages free their places: the next held ones are admitted.
    IF v_admitted IS NOT NULL THEN
        FOR v_channel_id IN SELECT DISTINCT a.id FROM pg_catalog.unnest(v_admitted) AS a (id) ORDER BY a.id LOOP
            PERFORM @extschema@._channel_admit(
                v_channel_id, pg_catalog.cardinality(pg_catalog.array_positions(v_admitted, v_channel_id)), 0, FALSE,
                v_now
            );
        END LOOP;
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
