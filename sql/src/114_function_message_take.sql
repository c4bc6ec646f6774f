-- Internal: the one statement that takes messages.  Lock up to p_limit
-- deliverable messages of one channel in (dequeue_at, id) order, skipping
-- rows other transactions hold, and lock each for p_lock_ms.  Returns each
-- message as it was before the lock (was_locked: an expired lock recovered).
--
-- Where the scan starts: at the channel's floor (_channel_scan_from), so
-- that it never steps over the index entries of the messages consumed since
-- the last VACUUM.  A channel
-- at its max_concurrency (p_expired_only) may deliver only its own expired
-- locks: those are found through message_locked_ix, never by walking the
-- ready backlog.  One statement holds both probes, one gated off.
--
-- An expired lock is a failed attempt ("lock expired" in the attempt log);
-- one whose message has had the channel's max_attempts deliveries goes to
-- the dead letters instead (returned with is_dead, for the caller's counts)
-- and a replacement is looked for: at most p_limit + 16 buried per call.
-- Each buried lock of a channel at max_concurrency freed a place, so the
-- replacements may be any deliverable message.
CREATE FUNCTION @extschema@._message_take(
    p_channel @extschema@.channel,
    p_now bigint,
    p_lock_ms bigint,
    p_limit integer,
    p_expired_only boolean
)
RETURNS TABLE (
    id bigint,
    content bytea,
    state bytea,
    num_attempts integer,
    dequeue_at bigint,
    was_locked boolean,
    is_dead boolean
)
LANGUAGE plpgsql
VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_want integer := p_limit;
    v_expired_only boolean := p_expired_only;
    v_buried integer := 0;
    v_ids bigint[];
    v_ats bigint[];
    v_was_locked boolean[];
    v_dead bigint[];
BEGIN
    LOOP
        -- The two probes, one gated off: a channel at max_concurrency reads
        -- message_locked_ix (its predicate is named), any other reads
        -- message_channel_ix from its floor.
        SELECT
            pg_catalog.array_agg(x.id), pg_catalog.array_agg(x.dequeue_at), pg_catalog.array_agg(x.is_locked),
            COALESCE(
                pg_catalog.array_agg(x.id) FILTER (WHERE x.is_locked AND x.num_attempts >= p_channel.max_attempts),
                '{}'
            )
        INTO v_ids, v_ats, v_was_locked, v_dead
        FROM (
            SELECT *
            FROM (
                SELECT m.id, m.dequeue_at, m.is_locked, m.num_attempts
                FROM @extschema@.message AS m
                WHERE
                    v_expired_only AND m.channel_id = p_channel.id AND m.is_locked AND m.is_counted
                    AND m.dequeue_at <= p_now
                ORDER BY m.dequeue_at, m.id
                LIMIT v_want
                FOR UPDATE SKIP LOCKED
            ) AS e
            UNION ALL
            SELECT *
            FROM (
                SELECT q.id, q.dequeue_at, q.is_locked, q.num_attempts
                FROM @extschema@.message AS q
                WHERE
                    NOT v_expired_only AND q.channel_id = p_channel.id
                    AND q.dequeue_at >= @extschema@._channel_scan_from(p_channel) AND q.dequeue_at <= p_now
                ORDER BY q.dequeue_at, q.id
                LIMIT v_want
                FOR UPDATE SKIP LOCKED
            ) AS r
        ) AS x;
        EXIT WHEN v_ids IS NULL;

        -- Returned in (dequeue_at, id) order.
        RETURN QUERY
        WITH taken AS (
            UPDATE @extschema@.message AS m
            SET
                dequeue_at = p_now + p_lock_ms,
                is_locked = TRUE,
                is_counted = p_channel.max_concurrency IS NOT NULL,
                num_attempts = m.num_attempts + 1,
                attempt_log = CASE
                    WHEN m.is_locked THEN
                        @extschema@._attempt_log_append(m.attempt_log, m.num_attempts, p_now, 'lock expired')
                    ELSE m.attempt_log
                END
            FROM ROWS FROM (
                pg_catalog.unnest(v_ids), pg_catalog.unnest(v_ats), pg_catalog.unnest(v_was_locked)
            ) AS h (id, old_at, old_locked)
            WHERE m.id = h.id AND h.id <> ALL(v_dead)
            RETURNING m.id, m.content, m.state, m.num_attempts, h.old_at, h.old_locked
        )

        SELECT t.id, t.content, t.state, t.num_attempts, t.old_at, t.old_locked, FALSE
        FROM taken AS t
        ORDER BY t.old_at, t.id;

        -- Expired locks that used up max_attempts: to the dead letters, and
        -- as many replacements looked for, within the bound.
        EXIT WHEN pg_catalog.cardinality(v_dead) = 0;
        FOREACH id IN ARRAY v_dead LOOP
            PERFORM @extschema@._message_bury(
                id, p_channel.id, p_channel.name, 'lock expired', p_now, p_channel.dedup_window_ms
            );
            is_dead := TRUE;
            RETURN NEXT;
        END LOOP;
        v_buried := v_buried + pg_catalog.cardinality(v_dead);
        EXIT WHEN v_buried >= p_limit + 16;
        v_want := LEAST(pg_catalog.cardinality(v_dead), p_limit + 16 - v_buried);
        v_expired_only := FALSE;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_take(@extschema@.channel, bigint, bigint, integer, boolean) IS
'Internal: lock up to p_limit deliverable messages of a channel with one index range scan from its floor, SKIP LOCKED; expired locks past max_attempts go to the dead letters.';

REVOKE ALL ON FUNCTION @extschema@._message_take(@extschema@.channel, bigint, bigint, integer, boolean) FROM PUBLIC;
