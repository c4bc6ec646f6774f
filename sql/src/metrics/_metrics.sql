-- Internal: the rows of the view lonnymq.metrics (and so of metrics_text()),
-- one per metric and label set.
--
-- Series.  A gauge has one series per configured channel, one per pattern
-- (every channel that follows it, configured once by channel_set('p*')), and
-- '*', every other channel: they partition the channels, so sum() over the
-- channel label gives the totals, and a million per-tenant channels make one
-- series, not a million.
--
-- Cost: bounded per channel, never per message (doc/metrics.md):
--   - the channels holding messages, one probe of message_channel_ix each
--     (the next channel_id after the last one found), and those holding
--     dead letters, one probe of dead_letter_channel_ix each;
--   - per channel, its name, its series (channel_pkey, channel_prefix_key)
--     and its next ready message's age (two probes: its first turn, and
--     its first due message waiting outside the round);
--   - the counts of a series stop at lonnymq.metrics_count_limit entries
--     (a setting, default 10,000), messages and dead letters each: exact
--     up to it, the limit itself beyond.  An exact count reads every
--     message (as the view channel_stats does: 0.5 to 0.7 s at 1,000,000
--     messages, measured on 0.11.2), and one kept per series would write
--     a row per message (8 to 11 % of the floor's CPU:
--     doc/dequeue-design.md, "Counters as rows").
-- Counters are the sequences' values (*_seq, schema/): no row is read.  States
-- as channel_stats counts them: ready (not locked, due; a paused or saturated
-- channel's held ones too), scheduled (not locked, due later), locked
-- (expired locks included until recovered), waiting (for their parents:
-- doc/dependencies.md).  SECURITY DEFINER: the view's
-- entry point.
-- Parameters: none.
-- Returns: rows (metric, channel, state, value): the gauges per series,
--   lonnymq_messages_count_limit, and the counters.
-- Calls: _clock_ms, _channel_id, _channel_pattern_config (inlined),
--   _waiting_dequeue_at (a constant).
-- Tables: reads message (message_channel_ix: the channels, their names, their
--   next ready messages and their counts), message_wait (message_wait_pkey:
--   whether a message past any clock waits), dead_letter
--   (dead_letter_channel_ix), channel (channel_pkey: a channel's series; every
--   configured channel's row), messages_created_seq, messages_delivered_seq,
--   messages_completed_seq, messages_failed_seq, messages_dead_lettered_seq,
--   messages_lock_expired_seq (their last values).
-- Locks: none.
CREATE FUNCTION @extschema@._metrics()
RETURNS TABLE (metric text, channel text, state text, value double precision)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE holding AS (
        SELECT (
            SELECT m.channel_id FROM @extschema@.message AS m
            WHERE m.channel_id >= '-9223372036854775808'::bigint
            ORDER BY m.channel_id
            LIMIT 1
        ) AS id
        UNION ALL
        SELECT (
            SELECT m.channel_id FROM @extschema@.message AS m
            WHERE m.channel_id > h.id
            ORDER BY m.channel_id
            LIMIT 1
        )
        FROM holding AS h
        WHERE h.id IS NOT NULL
    ),

    burying AS (
        SELECT (
            SELECT d.channel FROM @extschema@.dead_letter AS d
            WHERE d.channel IS NOT NULL
            ORDER BY d.channel
            LIMIT 1
        ) AS name
        UNION ALL
        SELECT (
            SELECT d.channel FROM @extschema@.dead_letter AS d
            WHERE d.channel > b.name
            ORDER BY d.channel
            LIMIT 1
        )
        FROM burying AS b
        WHERE b.name IS NOT NULL
    ),

    k AS MATERIALIZED (
        SELECT
            @extschema@._clock_ms() AS now,
            COALESCE(
                NULLIF(pg_catalog.current_setting('lonnymq.metrics_count_limit', TRUE), '')::bigint,
                10000
            ) AS count_limit
    ),

    channels AS MATERIALIZED (
        SELECT x.id, x.name, pg_catalog.bool_or(x.has_dead) AS has_dead, pg_catalog.bool_or(NOT x.has_dead) AS has_messages
        FROM (
            SELECT
                h.id,
                (
                    SELECT m.channel FROM @extschema@.message AS m
                    WHERE m.channel_id = h.id
                    ORDER BY m.channel_id, m.position NULLS FIRST, m.dequeue_at, m.id
                    LIMIT 1
                ) AS name,
                FALSE AS has_dead
            FROM holding AS h
            WHERE h.id IS NOT NULL
            UNION ALL
            SELECT @extschema@._channel_id(b.name), b.name, TRUE
            FROM burying AS b
            WHERE b.name IS NOT NULL
        ) AS x
        GROUP BY x.id, x.name
    ),

    series AS MATERIALIZED (
        SELECT
            s.series,
            pg_catalog.array_agg(s.id) FILTER (WHERE s.has_messages) AS ids,
            pg_catalog.array_agg(s.name) FILTER (WHERE s.has_messages) AS names,
            pg_catalog.array_agg(s.name) FILTER (WHERE s.has_dead) AS dead_names,
            pg_catalog.max(s.age_ms) AS age_ms
        FROM (
            SELECT
                COALESCE(
                    (SELECT COALESCE(c.pattern, c.name) FROM @extschema@.channel AS c WHERE c.id = ch.id AND c.name = ch.name),
                    (SELECT f.pattern FROM @extschema@._channel_pattern_config(ch.name) AS f),
                    '*'
                ) AS series,
                ch.id, ch.name, ch.has_dead, ch.has_messages,
                (
                    SELECT pg_catalog.max(k.now - GREATEST(r.dequeue_at, r.created_at))
                    FROM (
                        (
                            SELECT m.dequeue_at, m.created_at FROM @extschema@.message AS m
                            WHERE m.channel_id = ch.id AND m.position IS NOT NULL AND m.channel = ch.name
                            ORDER BY m.position NULLS FIRST
                            LIMIT 1
                        )
                        UNION ALL
                        (
                            SELECT m.dequeue_at, m.created_at FROM @extschema@.message AS m
                            WHERE
                                m.channel_id = ch.id AND m.position IS NULL AND m.dequeue_at <= k.now
                                AND NOT m.is_locked AND m.channel = ch.name AND m.schedule IS DISTINCT FROM ''
                            ORDER BY m.position NULLS FIRST, m.dequeue_at
                            LIMIT 1
                        )
                    ) AS r
                ) AS age_ms
            FROM channels AS ch CROSS JOIN k
            WHERE ch.has_messages OR ch.has_dead
            -- Configured channels and patterns have a series with or
            -- without messages, and so has '*'.
            UNION ALL
            SELECT c.name, NULL, NULL, FALSE, FALSE, NULL
            FROM @extschema@.channel AS c
            WHERE c.pattern IS NULL
            UNION ALL
            SELECT '*', NULL, NULL, FALSE, FALSE, NULL
        ) AS s
        GROUP BY s.series
    ),

    figures AS (
        SELECT s.series, n.ready, n.scheduled, n.locked, n.waiting, d.dead, GREATEST(COALESCE(s.age_ms, 0), 0) AS age_ms
        FROM series AS s
        CROSS JOIN k
        -- The first count_limit messages of the series' channels, in turn:
        -- the nested loop stops there.
        CROSS JOIN LATERAL (
            SELECT
                pg_catalog.count(*) FILTER (WHERE NOT m.is_locked AND m.dequeue_at <= k.now) AS ready,
                pg_catalog.count(*) FILTER (WHERE NOT m.is_locked AND m.dequeue_at > k.now AND NOT m.is_waiting)
                AS scheduled,
                pg_catalog.count(*) FILTER (WHERE m.is_locked) AS locked,
                pg_catalog.count(*) FILTER (WHERE m.is_waiting) AS waiting
            FROM (
                SELECT m.is_locked, m.dequeue_at, m.is_waiting
                FROM ROWS FROM (pg_catalog.unnest(s.ids), pg_catalog.unnest(s.names)) AS c (id, name)
                CROSS JOIN LATERAL (
                    SELECT
                        m.is_locked, m.dequeue_at,
                        -- (Past any clock, and its own count there.)
                        m.dequeue_at >= @extschema@._waiting_dequeue_at(-2305843009213693952) AND EXISTS (
                            SELECT 1 FROM @extschema@.message_wait AS w WHERE w.child_id = m.id AND w.bucket = -1
                        ) AS is_waiting
                    FROM @extschema@.message AS m
                    -- (A wake, schedule '', is no message: _channel_admit.)
                    WHERE m.channel_id = c.id AND m.channel = c.name AND m.schedule IS DISTINCT FROM ''
                ) AS m
                LIMIT k.count_limit
            ) AS m
        ) AS n
        CROSS JOIN LATERAL (
            SELECT pg_catalog.count(*) AS dead
            FROM (
                SELECT 1
                FROM pg_catalog.unnest(s.dead_names) AS c (name)
                CROSS JOIN LATERAL (
                    SELECT 1 FROM @extschema@.dead_letter AS d WHERE d.channel = c.name
                ) AS d
                LIMIT k.count_limit
            ) AS d
        ) AS d
    )

    SELECT 'lonnymq_messages', f.series, v.state, v.value::double precision
    FROM figures AS f
    CROSS JOIN LATERAL (
        VALUES ('ready', f.ready), ('scheduled', f.scheduled), ('locked', f.locked), ('waiting', f.waiting)
    ) AS v (state, value)
    UNION ALL
    SELECT 'lonnymq_dead_letters', f.series, NULL, f.dead
    FROM figures AS f
    UNION ALL
    SELECT 'lonnymq_oldest_ready_age_seconds', f.series, NULL, f.age_ms / 1000.0
    FROM figures AS f
    UNION ALL
    SELECT 'lonnymq_messages_count_limit', NULL, NULL, k.count_limit
    FROM k
    UNION ALL
    SELECT c.metric, NULL, NULL, pg_catalog.pg_sequence_last_value(c.seq)
    FROM (
        VALUES
        ('lonnymq_messages_created_total', '@extschema@.messages_created_seq'::regclass),
        ('lonnymq_messages_delivered_total', '@extschema@.messages_delivered_seq'::regclass),
        ('lonnymq_messages_completed_total', '@extschema@.messages_completed_seq'::regclass),
        ('lonnymq_messages_failed_total', '@extschema@.messages_failed_seq'::regclass),
        ('lonnymq_messages_dead_lettered_total', '@extschema@.messages_dead_lettered_seq'::regclass),
        ('lonnymq_messages_lock_expired_total', '@extschema@.messages_lock_expired_seq'::regclass)
    ) AS c (metric, seq)
$$;

COMMENT ON FUNCTION @extschema@._metrics() IS
'Internal: the rows of the view metrics: gauges per configured channel, pattern and ''*'' (the other channels), read a bounded amount per channel, and the counters.';

REVOKE ALL ON FUNCTION @extschema@._metrics() FROM PUBLIC;
