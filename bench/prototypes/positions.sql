-- Prototype A of issue 27: a fair position fixed when a message becomes ready.
--
-- position = round * 2^20 + the channel's slot (the low 20 bits of the hash of
-- its name): each channel has one place per round, and a round serves its
-- channels in slot order.  A message takes the first place of its channel at
-- or after both the front (the first ready position) and its channel's last
-- ready position + 2^20, so a channel gets one delivery per round.  The take
-- is the floor's: the first ready position, SKIP LOCKED.
--
-- Low-water marks without a guard that producers can starve: every writer of
-- the ready or due index holds the current epoch's parity (an advisory lock,
-- shared, until commit); position_bound_seq publishes bound * 2 + parity and
-- every position a writer writes is >= the bound it read (rechecked after
-- taking the lock).  A consumer raises the marks only once the previous
-- epoch's parity is free: then every writer in flight read the current bound.
-- Sequences hold the marks: they leave no row versions.
--
-- The entry points run with the extension's planner settings (sql/src/api/
-- 900_entry_point_settings.sql).
--
-- __GUARD__ markers: prototype A0 (the issue's 40-line prototype) is this file
-- with the guard and the marks removed by bench/prototype_delivery.py.
DROP SCHEMA IF EXISTS __SCHEMA__ CASCADE;
CREATE SCHEMA __SCHEMA__;
CREATE SEQUENCE __SCHEMA__.message_id_seq;
CREATE SEQUENCE __SCHEMA__.position_bound_seq MINVALUE 0 START 0;
CREATE SEQUENCE __SCHEMA__.position_mark_seq MINVALUE 0 START 0;
CREATE SEQUENCE __SCHEMA__.due_mark_seq MINVALUE 0 START 0;
CREATE SEQUENCE __SCHEMA__.epoch_at_seq MINVALUE 0 START 0;
-- Called, so that pg_sequence_last_value reads them (a SELECT from a
-- sequence is a seq scan, which the planner settings disable at 49 ms a read).
SELECT setval('__SCHEMA__.position_bound_seq', 0, true), setval('__SCHEMA__.position_mark_seq', 0, true),
    setval('__SCHEMA__.due_mark_seq', 0, true), setval('__SCHEMA__.epoch_at_seq', 0, true);
CREATE TABLE __SCHEMA__.channel (name text PRIMARY KEY, max_concurrency integer);
CREATE TABLE __SCHEMA__.m (
    id bigint PRIMARY KEY DEFAULT nextval('__SCHEMA__.message_id_seq'),
    channel_id bigint NOT NULL,
    channel text NOT NULL,
    position bigint,
    dequeue_at bigint NOT NULL,
    is_locked boolean NOT NULL DEFAULT false,
    num_attempts integer NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    content bytea NOT NULL
) WITH (fillfactor = 70);
-- Ready: in the round order; ties (a priority message sharing its channel's
-- first place) by (dequeue_at, id).
CREATE INDEX m_ready_ix ON __SCHEMA__.m (position, dequeue_at, id) WHERE NOT is_locked AND position IS NOT NULL;
-- A channel's ready positions: its last one (producers), its first one (priority).
CREATE INDEX m_channel_ix ON __SCHEMA__.m (channel_id, position) INCLUDE (dequeue_at)
    WHERE NOT is_locked AND position IS NOT NULL;
-- Not ready: scheduled, or locked, by the time it becomes deliverable.
CREATE INDEX m_due_ix ON __SCHEMA__.m (dequeue_at) WHERE is_locked OR position IS NULL;

CREATE FUNCTION __SCHEMA__.create(p_channel text, p_content bytea) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_mergejoin = off SET enable_hashjoin = off
SET jit = off AS $$
DECLARE
    v_channel_id bigint := pg_catalog.hashtextextended(p_channel, 0);
    v_at bigint := (extract(epoch FROM now()) * 1000)::bigint;
    v_epoch bigint;
    v_low bigint;
    v_last_at bigint;
    v_id bigint;
BEGIN
    LOOP
        -- The epoch (guarded), the front and the channel's last ready place.
        SELECT e.v, GREATEST(e.v >> 1, f.position, l.position + 1048576), l.dequeue_at
        INTO v_epoch, v_low, v_last_at
        FROM (SELECT pg_catalog.pg_sequence_last_value('__SCHEMA__.position_bound_seq') AS v) AS e
        LEFT JOIN __SCHEMA__.channel AS c ON c.name = p_channel
        LEFT JOIN LATERAL (SELECT pg_catalog.pg_advisory_xact_lock_shared(1819111690, (e.v & 1)::integer) /*__GUARD__*/) AS g ON TRUE
        LEFT JOIN LATERAL (
            SELECT r.position FROM __SCHEMA__.m AS r
            WHERE r.position >= e.v >> 1 AND NOT r.is_locked AND r.position IS NOT NULL
            ORDER BY r.position LIMIT 1
        ) AS f ON TRUE
        LEFT JOIN LATERAL (
            SELECT r.position, r.dequeue_at FROM __SCHEMA__.m AS r
            WHERE r.channel_id = v_channel_id AND r.position >= e.v >> 1 AND NOT r.is_locked AND r.position IS NOT NULL
            ORDER BY r.position DESC LIMIT 1
        ) AS l ON TRUE;
        IF v_at < v_last_at THEN
            -- Priority: it shares its channel's first place, ordered before it.
            SELECT r.position INTO v_low FROM __SCHEMA__.m AS r
            WHERE r.channel_id = v_channel_id AND r.position >= v_epoch >> 1 AND NOT r.is_locked AND r.position IS NOT NULL
            ORDER BY r.position LIMIT 1;
        END IF;
        INSERT INTO __SCHEMA__.m (channel_id, channel, position, dequeue_at, created_at, content)
        SELECT v_channel_id, p_channel, v_low + ((v_channel_id - v_low) & 1048575), v_at,
            (extract(epoch FROM clock_timestamp()) * 1000)::bigint, p_content
        WHERE pg_catalog.pg_sequence_last_value('__SCHEMA__.position_bound_seq') = v_epoch /*__GUARD__*/
        RETURNING id INTO v_id;
        EXIT WHEN v_id IS NOT NULL;
    END LOOP;
    RETURN v_id;
END $$;

-- Raise the marks when the previous epoch's writers are all done.
CREATE FUNCTION __SCHEMA__._raise(p_now bigint) RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_epoch bigint := pg_catalog.pg_sequence_last_value('__SCHEMA__.position_bound_seq');
    v_front bigint;
BEGIN
    IF NOT pg_catalog.pg_try_advisory_lock(1819111690, (1 - (v_epoch & 1))::integer) THEN
        RETURN;
    END IF;
    PERFORM pg_catalog.pg_advisory_unlock(1819111690, (1 - (v_epoch & 1))::integer);
    SELECT r.position INTO v_front FROM __SCHEMA__.m AS r
    WHERE r.position >= pg_catalog.pg_sequence_last_value('__SCHEMA__.position_mark_seq')
        AND NOT r.is_locked AND r.position IS NOT NULL
    ORDER BY r.position LIMIT 1;
    v_front := COALESCE(v_front, v_epoch >> 1);
    PERFORM pg_catalog.setval('__SCHEMA__.position_mark_seq', LEAST(v_front, v_epoch >> 1));
    PERFORM pg_catalog.setval('__SCHEMA__.due_mark_seq', LEAST(
        pg_catalog.pg_sequence_last_value('__SCHEMA__.epoch_at_seq'),
        COALESCE((SELECT d.dequeue_at FROM __SCHEMA__.m AS d
                  WHERE (d.is_locked OR d.position IS NULL)
                    AND d.dequeue_at >= pg_catalog.pg_sequence_last_value('__SCHEMA__.due_mark_seq')
                  ORDER BY d.dequeue_at LIMIT 1), p_now)));
    PERFORM pg_catalog.setval('__SCHEMA__.epoch_at_seq', p_now);
    PERFORM pg_catalog.setval('__SCHEMA__.position_bound_seq', GREATEST(v_front, v_epoch >> 1) * 2 + 1 - (v_epoch & 1));
END $$;

CREATE FUNCTION __SCHEMA__.complete_dequeue(
    p_ids bigint[], p_num_attempts integer[], p_lock_ms bigint,
    OUT id bigint, OUT num_attempts integer, OUT content bytea)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_mergejoin = off SET enable_hashjoin = off
SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_now bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_mark bigint;
    v_due boolean;
    v_position bigint;
BEGIN
    DELETE FROM __SCHEMA__.m AS m
    USING ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)) AS t (id, num_attempts)
    WHERE m.id = t.id AND m.id = ANY(p_ids) AND m.num_attempts = t.num_attempts AND m.is_locked;
    -- The marks, the epoch (a take writes a lock into the due index), and
    -- whether anything is due (promotion: not prototyped, only probed).
    -- (The due probe in a LATERAL subquery: the mark is then a parameter of
    -- its index scan, so the range starts at the mark whatever the plan.)
    SELECT k.mark, due.any
    INTO v_mark, v_due
    FROM (
            SELECT
                pg_catalog.pg_sequence_last_value('__SCHEMA__.position_mark_seq') AS mark,
                pg_catalog.pg_sequence_last_value('__SCHEMA__.due_mark_seq') AS due_mark,
                pg_catalog.pg_sequence_last_value('__SCHEMA__.position_bound_seq') AS epoch
        ) AS k,
        LATERAL (SELECT EXISTS (
            SELECT 1 FROM __SCHEMA__.m AS d
            WHERE (d.is_locked OR d.position IS NULL) AND d.dequeue_at >= k.due_mark AND d.dequeue_at <= v_now
        ) AS any) AS due
    LEFT JOIN LATERAL (SELECT pg_catalog.pg_advisory_xact_lock_shared(1819111690, (k.epoch & 1)::integer) /*__GUARD__*/) AS g ON TRUE
    ;
    UPDATE __SCHEMA__.m AS m
    SET dequeue_at = v_now + p_lock_ms, is_locked = TRUE, num_attempts = m.num_attempts + 1
    WHERE m.id = (
        SELECT q.id FROM __SCHEMA__.m AS q
        WHERE q.position >= v_mark AND NOT q.is_locked AND q.position IS NOT NULL
        ORDER BY q.position, q.dequeue_at, q.id LIMIT 1 FOR UPDATE SKIP LOCKED
    )
    RETURNING m.id, m.num_attempts, m.content, m.position INTO id, num_attempts, content, v_position;
    IF v_position >= v_mark + 16 * 1048576 OR v_position > v_mark AND id % 16 = 0 THEN
        PERFORM __SCHEMA__._raise(v_now);  /*__GUARD__*/
    END IF;
END $$;
