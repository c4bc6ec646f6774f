\ir include/setup.psql
SELECT plan(23);

SELECT is(pg_temp.lmq_take(), NULL, 'an empty queue delivers nothing');
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(1000) $$, 'nothing ready is an empty result, not an error');

-- Scheduling
SELECT lonnymq.message_create('s', 'future', pg_temp.lmq_now() + 3600000);
SELECT is(pg_temp.lmq_take(), NULL, 'a message is not delivered before its dequeue_at');
SELECT lonnymq.message_create('s', 'soon', pg_temp.lmq_now() + 300);
SELECT is(pg_temp.lmq_take(), NULL, 'nor a message due in 300 ms');
SELECT pg_sleep(0.35);
SELECT is(pg_temp.lmq_take(), 's:soon', 'it is delivered once due, before the later one');
SELECT is(pg_temp.lmq_take(), NULL, 'and the future message still waits');

-- Priority within a channel: a past or negative dequeue_at goes first.
SELECT lonnymq.message_create('p', 'normal1'), lonnymq.message_create('p', 'normal2');
SELECT lonnymq.message_create('p', 'urgent', -1000);
SELECT lonnymq.message_create('p', 'urgent-zero', 0);
SELECT is(pg_temp.lmq_take_all(4), ARRAY['p:urgent', 'p:urgent-zero', 'p:normal1', 'p:normal2'],
    'within a channel: (dequeue_at, id) order, priority messages first');

-- ---------------------------------------------------------------- rounds
-- Between channels: rounds.  0.11.0 serves the channels of a round in slot
-- order (the low 20 bits of hashtextextended(name, 0)), not in the order
-- they became ready, and a channel that becomes ready joins the current
-- round at its slot, or the next round when its slot has passed
-- (doc/dequeue-design.md, "What must not change").  So the exact
-- interleavings that 0.10.1 asserted here are asserted as the round
-- property instead, which holds whatever the hashes of the names:
-- pg_temp.round_faults() checks every creation and delivery logged below
-- (pg_temp.put, pg_temp.take) and lists what breaks it:
--   A. a channel that stays ready is delivered again before any other
--      channel gets two deliveries (one delivery per round, a batch of N
--      counting as N; an urgent message never moves its channel ahead);
--   B. a channel that becomes ready is delivered before any other channel
--      gets two deliveries (it joins the current round, or the next);
--   C. within a channel, (dequeue_at, id) order among its ready messages
--      (priority by a past dequeue_at).
CREATE TEMP TABLE lmq_log (
    seq bigserial PRIMARY KEY,
    is_delivery boolean NOT NULL,
    id bigint NOT NULL,
    channel text NOT NULL,
    content text NOT NULL,
    dequeue_at bigint NOT NULL
);

-- Create a message that is ready now (p_dequeue_at NULL or past), logged.
CREATE FUNCTION pg_temp.put(p_channel text, p_content text, p_dequeue_at bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_id bigint := lonnymq.message_create(p_channel, convert_to(p_content, 'UTF8'), p_dequeue_at);
BEGIN
    INSERT INTO lmq_log (is_delivery, id, channel, content, dequeue_at)
    SELECT FALSE, m.id, m.channel, p_content, m.dequeue_at FROM lonnymq.message AS m WHERE m.id = v_id;
END;
$$;

-- Dequeue up to p_limit (any channel), logged; "channel:content" in delivery order.
CREATE FUNCTION pg_temp.take(p_limit integer)
RETURNS text[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_out text[] := '{}';
    v_got record;
BEGIN
    FOR v_got IN
        SELECT d.id, d.channel, convert_from(d.content, 'UTF8') AS content, d.dequeue_at
        FROM lonnymq.message_dequeue(60000, p_limit) WITH ORDINALITY
            AS d (id, channel, content, state, num_attempts, dequeue_at, is_recovered, ord)
        ORDER BY d.ord
    LOOP
        INSERT INTO lmq_log (is_delivery, id, channel, content, dequeue_at)
        VALUES (TRUE, v_got.id, v_got.channel, v_got.content, v_got.dequeue_at);
        v_out := v_out || (v_got.channel || ':' || v_got.content);
    END LOOP;
    RETURN v_out;
END;
$$;

-- Deliveries as a set: sorted, space-separated.
CREATE FUNCTION pg_temp.sorted(p_served text[])
RETURNS text
LANGUAGE sql
AS $$ SELECT string_agg(x, ' ' ORDER BY x) FROM unnest(p_served) AS x $$;

-- A channel's ready messages (created, not yet delivered) just before log entry p_seq.
CREATE FUNCTION pg_temp.ready_before(p_channel text, p_seq bigint)
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT count(*) FILTER (WHERE NOT l.is_delivery) - count(*) FILTER (WHERE l.is_delivery)
    FROM lmq_log AS l WHERE l.channel = p_channel AND l.seq < p_seq
$$;

-- How many deliveries of p_channel lie strictly between two log entries.
CREATE FUNCTION pg_temp.served_between(p_channel text, p_from bigint, p_to bigint)
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT count(*) FROM lmq_log AS l
    WHERE l.is_delivery AND l.channel = p_channel AND l.seq > p_from AND l.seq < p_to
$$;

-- What breaks the round property in the log (rules A, B, C above).
CREATE FUNCTION pg_temp.all_round_faults()
RETURNS text[]
LANGUAGE sql
AS $$
    WITH
    log_end AS (SELECT coalesce(max(seq), 0) + 1 AS seq FROM lmq_log),
    channels AS (SELECT DISTINCT channel FROM lmq_log),
    -- A: after a delivery that leaves its channel ready, until its next one
    -- (or the end of the log).
    a AS (
        SELECT 'A: ' || y.channel || ' served ' || pg_temp.served_between(y.channel, d.seq, d.next_seq)
            || ' times between deliveries ' || d.seq || ' and ' || d.next_seq || ' of ' || d.channel AS fault
        FROM (
            SELECT l.seq, l.channel,
                coalesce(lead(l.seq) OVER (PARTITION BY l.channel ORDER BY l.seq), (SELECT seq FROM log_end)) AS next_seq
            FROM lmq_log AS l WHERE l.is_delivery
        ) AS d
        CROSS JOIN channels AS y
        WHERE y.channel <> d.channel
            AND pg_temp.ready_before(d.channel, d.seq + 1) > 0
            AND pg_temp.served_between(y.channel, d.seq, d.next_seq) > 1
    ),
    -- B: from a creation that makes its channel ready until the channel's
    -- next delivery (or the end of the log).
    b AS (
        SELECT 'B: ' || y.channel || ' served ' || pg_temp.served_between(y.channel, c.seq, c.first_seq)
            || ' times between ' || c.channel || ' becoming ready (' || c.seq || ') and its delivery (' || c.first_seq || ')' AS fault
        FROM (
            SELECT l.seq, l.channel,
                coalesce(
                    (SELECT min(n.seq) FROM lmq_log AS n WHERE n.is_delivery AND n.channel = l.channel AND n.seq > l.seq),
                    (SELECT seq FROM log_end)
                ) AS first_seq
            FROM lmq_log AS l
            WHERE NOT l.is_delivery AND pg_temp.ready_before(l.channel, l.seq) = 0
        ) AS c
        CROSS JOIN channels AS y
        WHERE y.channel <> c.channel AND pg_temp.served_between(y.channel, c.seq, c.first_seq) > 1
    ),
    -- C: a delivery while a ready message of its channel sorts before it.
    c AS (
        SELECT 'C: ' || d.channel || ':' || d.content || ' delivered (' || d.seq || ') before ' || d.channel || ':' || e.content AS fault
        FROM lmq_log AS d
        INNER JOIN lmq_log AS dc ON dc.id = d.id AND NOT dc.is_delivery
        INNER JOIN lmq_log AS e ON e.channel = d.channel AND NOT e.is_delivery AND e.seq < d.seq
            AND (e.dequeue_at, e.id) < (dc.dequeue_at, dc.id)
        WHERE d.is_delivery
            AND NOT EXISTS (SELECT 1 FROM lmq_log AS x WHERE x.is_delivery AND x.id = e.id AND x.seq < d.seq)
    )
    SELECT coalesce(array_agg(fault ORDER BY fault), '{}')
    FROM (SELECT fault FROM a UNION ALL SELECT fault FROM b UNION ALL SELECT fault FROM c) AS f
$$;

-- The faults not reported by an earlier call ('{}' when there are none), so
-- that each assertion shows what its own deliveries broke.
CREATE TEMP TABLE lmq_reported (fault text PRIMARY KEY);
CREATE FUNCTION pg_temp.round_faults()
RETURNS text[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_new text[];
BEGIN
    SELECT coalesce(array_agg(f ORDER BY f), '{}') INTO v_new
    FROM unnest(pg_temp.all_round_faults()) AS f
    WHERE f NOT IN (SELECT r.fault FROM lmq_reported AS r);
    INSERT INTO lmq_reported SELECT unnest(v_new);
    RETURN v_new;
END;
$$;

-- Everything logged as created and not yet delivered, as pg_temp.sorted.
CREATE FUNCTION pg_temp.undelivered()
RETURNS text
LANGUAGE sql
AS $$
    SELECT string_agg(c.channel || ':' || c.content, ' ' ORDER BY c.channel || ':' || c.content)
    FROM lmq_log AS c
    WHERE NOT c.is_delivery AND NOT EXISTS (SELECT 1 FROM lmq_log AS d WHERE d.is_delivery AND d.id = c.id)
$$;

SELECT pg_temp.put('A', 'a' || g) FROM generate_series(1, 4) AS g;
SELECT pg_temp.put('B', 'b' || g) FROM generate_series(1, 4) AS g;
SELECT pg_temp.put('C', 'c' || g) FROM generate_series(1, 4) AS g;
SELECT pg_temp.take(6) AS served \gset
SELECT is(ARRAY[pg_temp.sorted(:'served'::text[])] || pg_temp.round_faults(),
    ARRAY['A:a1 A:a2 B:b1 B:b2 C:c1 C:c2'],
    'channels are served in rounds: one delivery each per round');

-- A busy channel's urgent message reorders that channel only: it takes the
-- channel's place in the next round, and the message it displaces moves one
-- round on.
SELECT pg_temp.put('A', 'a-urgent', -1000000);
SELECT pg_temp.take(3) AS served \gset
SELECT is(ARRAY[pg_temp.sorted(:'served'::text[])] || pg_temp.round_faults(),
    ARRAY['A:a-urgent B:b3 C:c3'],
    'an urgent message in a busy channel does not move the channel ahead');

-- A new channel with an urgent message takes its place in the current round
-- (or the next, when its slot has passed), whatever its dequeue_at.
SELECT min(position) AS front FROM lonnymq.message WHERE position IS NOT NULL \gset
SELECT pg_temp.put('D', 'd-urgent', -9000000000000);
SELECT is(
    (SELECT position FROM lonnymq.message WHERE channel = 'D'),
    (SELECT f + ((hashtextextended('D', 0) - f) & 1048575)
     FROM (SELECT greatest(:front, (SELECT last_value >> 1 FROM lonnymq.position_bound_seq)) AS f) AS x),
    'a new channel''s first place: its slot in the round being served, or in the next'
);
SELECT pg_temp.undelivered() AS ready_now \gset
SELECT pg_temp.take(5) AS served \gset
-- (What was ready: 'A:a3 A:a4 B:b4 C:c4 D:d-urgent' after the rounds above.)
SELECT is(ARRAY[pg_temp.sorted(:'served'::text[])] || pg_temp.round_faults(),
    ARRAY[:'ready_now'],
    'a new channel with an urgent message joins the rounds without moving ahead of its place');
SELECT is(pg_temp.lmq_take(), NULL, 'everything was delivered once');

-- An idle channel that gets an urgent message waits for the channels already
-- waiting: its place is one round after the one it was served in.
SELECT pg_temp.put('E', 'e1'), pg_temp.put('F', 'f1'), pg_temp.put('G', 'g1');
SELECT is(pg_temp.take(1), ARRAY['E:e1'], 'E first');
SELECT lonnymq.message_complete(m.id, m.num_attempts) FROM lonnymq.message AS m WHERE m.channel = 'E';
SELECT is(pg_temp.lmq_take(60000, 'E'), NULL, 'E is empty now');
-- (0.10.1 kept E's row, waiting for a wake-up.  0.11.0: a channel without
-- configuration that is empty leaves nothing behind, no row and no place.)
SELECT is(
    (SELECT count(*) FROM lonnymq.channel WHERE name = 'E')
        + (SELECT count(*) FROM lonnymq.message WHERE channel = 'E')
        + (SELECT count(*) FROM lonnymq.channel_stats WHERE channel = 'E'),
    0::bigint,
    'and leaves nothing behind: no channel row, no message, no place'
);
SELECT pg_temp.put('E', 'e-urgent', -9000000000000);
SELECT pg_temp.take(3) AS served \gset
SELECT is(ARRAY[pg_temp.sorted((:'served'::text[])[1:2]), (:'served'::text[])[3]] || pg_temp.round_faults(),
    ARRAY['F:f1 G:g1', 'E:e-urgent'],
    'an idle channel with an urgent message waits for the channels already waiting');

-- A batch shares itself among channels as one-at-a-time rounds would.
SELECT pg_temp.put('K', 'k1');
SELECT pg_temp.put('L', 'l' || g) FROM generate_series(1, 5) AS g;
SELECT pg_temp.put('M', 'm' || g) FROM generate_series(1, 5) AS g;
SELECT pg_temp.take(7) AS served \gset
SELECT is(ARRAY[pg_temp.sorted(:'served'::text[])] || pg_temp.round_faults(),
    ARRAY['K:k1 L:l1 L:l2 L:l3 M:m1 M:m2 M:m3'],
    'a batch of 7 over channels holding 1, 5 and 5: one delivery each per round, the short channel drops out');
SELECT pg_temp.take(4) AS served \gset
SELECT is(ARRAY[pg_temp.sorted(:'served'::text[])] || pg_temp.round_faults(),
    ARRAY['L:l4 L:l5 M:m4 M:m5'],
    'and the next batch continues the rounds where it stopped');

-- Priority within a busy channel keeps the rounds, also for a message that
-- sorts between the channel's first and last ready messages.
SELECT pg_temp.put('Q', 'q10', 10), pg_temp.put('R', 'r10', 10);
SELECT pg_temp.put('Q', 'q20', 20), pg_temp.put('R', 'r20', 20);
SELECT pg_temp.put('Q', 'q15', 15), pg_temp.put('R', 'r30', 30);
SELECT pg_temp.take(6) AS served \gset
SELECT is(ARRAY[pg_temp.sorted(:'served'::text[])] || pg_temp.round_faults(),
    ARRAY['Q:q10 Q:q15 Q:q20 R:r10 R:r20 R:r30'],
    'a message that sorts inside its channel''s ready messages gives the channel no second delivery in a round');

-- p_channel restricts delivery to one channel; p_limit bounds the batch.
SELECT lonnymq.message_create('X', convert_to('x' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT lonnymq.message_create('Y', convert_to('y' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT is(
    (SELECT array_agg(convert_from(d.content, 'UTF8')) FROM lonnymq.message_dequeue(60000, 2, 'Y') AS d),
    ARRAY['y1', 'y2'],
    'p_channel delivers from that channel only, up to p_limit'
);
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(60000, 1, 'no-such-channel') $$,
    'an unknown p_channel delivers nothing');
SELECT is(
    (SELECT count(*) FROM lonnymq.message_dequeue(60000, 1000)),
    4::bigint,
    'a large p_limit returns what is ready'
);
SELECT is(
    (SELECT count(*) FROM lonnymq.message_dequeue(60000, NULL, NULL)),
    0::bigint,
    'NULL p_limit and p_channel mean the defaults'
);

SELECT * FROM finish();
ROLLBACK;
