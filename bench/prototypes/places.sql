-- Prototype B of issue 27: the rounds as a table of places, one per ready
-- message, and the message taken at its channel's head.
--
-- A create inserts the message and a place (position computed as in
-- prototype A); a take deletes the first place (SKIP LOCKED) and takes its
-- channel's first ready message in (dequeue_at, id) order, so priority within
-- a channel needs nothing special.  No marks: the head probe walks a
-- channel's consumed head as the floor's does.
DROP SCHEMA IF EXISTS __SCHEMA__ CASCADE;
CREATE SCHEMA __SCHEMA__;
CREATE SEQUENCE __SCHEMA__.message_id_seq;
CREATE TABLE __SCHEMA__.channel (name text PRIMARY KEY, max_concurrency integer);
CREATE TABLE __SCHEMA__.m (
    id bigint PRIMARY KEY DEFAULT nextval('__SCHEMA__.message_id_seq'),
    channel_id bigint NOT NULL,
    channel text NOT NULL,
    dequeue_at bigint NOT NULL,
    is_locked boolean NOT NULL DEFAULT false,
    num_attempts integer NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    content bytea NOT NULL
) WITH (fillfactor = 70);
CREATE INDEX m_channel_ix ON __SCHEMA__.m (channel_id, dequeue_at, id);
CREATE TABLE __SCHEMA__.place (position bigint NOT NULL, channel_id bigint NOT NULL);
CREATE INDEX place_ix ON __SCHEMA__.place (position);
CREATE INDEX place_channel_ix ON __SCHEMA__.place (channel_id, position);

CREATE FUNCTION __SCHEMA__.create(p_channel text, p_content bytea) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_mergejoin = off SET enable_hashjoin = off
SET jit = off AS $$
DECLARE
    v_channel_id bigint := pg_catalog.hashtextextended(p_channel, 0);
    v_id bigint;
BEGIN
    PERFORM FROM __SCHEMA__.channel AS c WHERE c.name = p_channel;
    INSERT INTO __SCHEMA__.m (channel_id, channel, dequeue_at, created_at, content)
    VALUES (v_channel_id, p_channel, (extract(epoch FROM now()) * 1000)::bigint,
        (extract(epoch FROM clock_timestamp()) * 1000)::bigint, p_content)
    RETURNING id INTO v_id;
    INSERT INTO __SCHEMA__.place (position, channel_id)
    SELECT b.low + ((v_channel_id - b.low) & 1048575), v_channel_id
    FROM (
        SELECT GREATEST(0, (SELECT p.position FROM __SCHEMA__.place AS p ORDER BY p.position LIMIT 1),
            (SELECT p.position FROM __SCHEMA__.place AS p WHERE p.channel_id = v_channel_id
             ORDER BY p.position DESC LIMIT 1) + 1048576) AS low
    ) AS b;
    RETURN v_id;
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
    v_channel_id bigint;
BEGIN
    DELETE FROM __SCHEMA__.m AS m
    USING ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)) AS t (id, num_attempts)
    WHERE m.id = t.id AND m.id = ANY(p_ids) AND m.num_attempts = t.num_attempts AND m.is_locked;
    DELETE FROM __SCHEMA__.place AS p
    WHERE p.ctid = (SELECT q.ctid FROM __SCHEMA__.place AS q ORDER BY q.position LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING p.channel_id INTO v_channel_id;
    UPDATE __SCHEMA__.m AS m
    SET dequeue_at = v_now + p_lock_ms, is_locked = TRUE, num_attempts = m.num_attempts + 1
    WHERE m.id = (
        SELECT q.id FROM __SCHEMA__.m AS q
        WHERE q.channel_id = v_channel_id AND q.dequeue_at <= v_now
        ORDER BY q.dequeue_at, q.id LIMIT 1 FOR UPDATE SKIP LOCKED
    )
    RETURNING m.id, m.num_attempts, m.content INTO id, num_attempts, content;
END $$;
