\ir include/setup.psql
-- The marks (0.11.0; they replace 0.8.0's per-channel floors,
-- channel_floor).  Every scan of the round order starts at the position
-- mark, and the due probe at the due mark, lower bounds below which nothing
-- live lies, kept in sequences; a dequeue raises them every 8 deliveries when
-- no writer of the previous epoch is in flight (doc/dequeue-design.md,
-- "Marks, and the epoch guard").  Here:
--   * every position written is at least the writers' bound, in its
--     channel's slot, one place per channel and round;
--   * takes raise the marks, which only rise; no ready message lies below
--     the position mark, no scheduled or locked one below the due mark;
--   * a message that becomes ready after a raise, whatever its dequeue_at,
--     is placed at or above the bound and delivered, priority first;
--   * under a held snapshot a take reads what it reads without one: it
--     starts at the mark, not at the consumed entries the snapshot keeps;
--   * a producer whose transaction spans raises (the epoch guard) holds
--     the mark below its message, which is delivered once it commits.
-- Only a call whose transaction wrote nothing before it raises the marks,
-- so the calls below are transactions of their own: this file commits, and
-- leaves nothing behind (every message is completed, the marks lowered back
-- to their start, which is always safe).  The held snapshot and the
-- producer in flight are other sessions, through dblink.
\ir include/probes.psql

-- The marks now: bound, position mark, due mark, epoch_at, parity.
CREATE FUNCTION pg_temp.marks()
RETURNS bigint[]
LANGUAGE sql
AS $$
    SELECT ARRAY[
        pg_sequence_last_value('lonnymq.position_bound_seq') >> 1,
        pg_sequence_last_value('lonnymq.position_mark_seq'),
        pg_sequence_last_value('lonnymq.due_mark_seq'),
        pg_sequence_last_value('lonnymq.epoch_at_seq'),
        pg_sequence_last_value('lonnymq.position_bound_seq') & 1
    ]
$$;

-- Ready messages that break the rules of positions: below the bound or the
-- mark, or out of their channel's slot.  (Below the bound is a rule only
-- while no other session writes: a producer in flight may commit a place
-- that a raise has passed the bound of, never the mark.)
CREATE FUNCTION pg_temp.misplaced()
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT count(*) FROM lonnymq.message AS m
    WHERE m.position IS NOT NULL AND (
        m.position < pg_sequence_last_value('lonnymq.position_bound_seq') >> 1
        OR m.position < pg_sequence_last_value('lonnymq.position_mark_seq')
        OR (m.position & 1048575) <> (m.channel_id & 1048575)
    )
$$;

-- Scheduled or locked messages below the due mark.
CREATE FUNCTION pg_temp.below_due_mark()
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT count(*) FROM lonnymq.message AS m
    WHERE m.position IS NULL AND NOT m.is_held AND m.dequeue_at < pg_sequence_last_value('lonnymq.due_mark_seq')
$$;

-- The marks after each call, and what lies below them.
CREATE TEMP TABLE seen (n serial, marks bigint[], misplaced bigint, below_due bigint);
CREATE FUNCTION pg_temp.sample()
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO seen (marks, misplaced, below_due) SELECT pg_temp.marks(), pg_temp.misplaced(), pg_temp.below_due_mark()
$$;

SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'dblink')
    AND NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'dblink') AS create_dblink \gset
\if :create_dblink
CREATE EXTENSION dblink;
\endif
SELECT count(*) > 0 AS has_dblink FROM pg_extension WHERE extname = 'dblink' \gset
SELECT format('dbname=%s user=%s port=%s host=%s', current_database(), current_user, current_setting('port'),
    coalesce(nullif(split_part(current_setting('unix_socket_directories'), ',', 1), ''), 'localhost')) AS conninfo \gset

SELECT plan(20);
COMMIT;

-- ---------------------------------------------------------------- places
SELECT pg_temp.marks() AS start \gset
SELECT count(*) FROM lonnymq.message_create_batch('f', array_fill('f'::bytea, ARRAY[40]));
SELECT count(*) FROM lonnymq.message_create_batch('g', array_fill('g'::bytea, ARRAY[20]));
SELECT is(pg_temp.misplaced(), 0::bigint, 'every place is at or above the bound, in its channel''s slot');
SELECT is(
    (SELECT count(DISTINCT m.position >> 20) FROM lonnymq.message AS m WHERE m.channel = 'f'),
    40::bigint,
    'one place per round: 40 messages of one channel take 40 rounds'
);

-- ---------------------------------------------------------------- raises
-- 40 takes, each a transaction of its own, the marks sampled after each.
\o /dev/null
SELECT
    'SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000) AS d',
    'SELECT pg_temp.sample()'
FROM generate_series(1, 40) \gexec
\o
SELECT is((SELECT count(*) FROM lonnymq.message), 20::bigint, '40 messages taken and completed');
SELECT ok((SELECT s.marks[2] > (:'start'::bigint[])[2] FROM seen AS s ORDER BY s.n DESC LIMIT 1),
    'the takes raised the position mark');
SELECT ok((SELECT s.marks[1] > (:'start'::bigint[])[1] FROM seen AS s ORDER BY s.n DESC LIMIT 1),
    'and the bound');
SELECT ok((SELECT s.marks[3] > (:'start'::bigint[])[3] AND s.marks[4] > (:'start'::bigint[])[4]
           FROM seen AS s ORDER BY s.n DESC LIMIT 1),
    'and the due mark, in a new epoch');
SELECT is(
    (SELECT count(*) FROM seen AS s JOIN seen AS p ON p.n = s.n - 1
     WHERE s.marks[1] < p.marks[1] OR s.marks[2] < p.marks[2] OR s.marks[3] < p.marks[3]),
    0::bigint,
    'the marks only rise'
);
SELECT is((SELECT count(*) FROM seen WHERE marks[2] > marks[1]), 0::bigint, 'the position mark never passes the bound');
SELECT is((SELECT sum(misplaced) + sum(below_due) FROM seen), 0::numeric,
    'no ready message ever lay below the position mark or the bound, no scheduled or locked one below the due mark');

-- ---------------------------------------------------------------- after a raise
-- Messages that become ready now, whatever their dequeue_at: at or above
-- the bound, and delivered; a priority message first in its channel.
SELECT lonnymq.message_create('f', 'urgent', -5) AS urgent \gset
SELECT lonnymq.message_create('h', 'ancient', 1) AS ancient \gset
SELECT is(pg_temp.misplaced(), 0::bigint, 'a priority message and one dated 1970 are placed at or above the bound');
SELECT is(pg_temp.lmq_take(60000, 'f'), 'f:urgent', 'the priority message is delivered first in its channel');
SELECT is(
    (SELECT count(*) FROM unnest(pg_temp.lmq_take_all(2)) AS t (x) WHERE x = 'h:ancient'),
    1::bigint,
    'and the old one within the round'
);
-- A defer to 1970 and a retry without a backoff: ready again at once,
-- placed at or above the bound, in (dequeue_at, id) order in their channel.
SELECT lonnymq.channel_set('r', p_backoff_base_ms => 0);
SELECT count(*) FROM lonnymq.message_create_batch('r', ARRAY['r1', 'r2', 'r3', 'r4']::bytea[]);
SELECT d.id AS r1, d.num_attempts AS r1tok FROM lonnymq.message_dequeue(60000, 1, 'r') AS d \gset
SELECT d.id AS r2, d.num_attempts AS r2tok FROM lonnymq.message_dequeue(60000, 1, 'r') AS d \gset
SELECT lonnymq.message_defer(:r1, :r1tok, 0);
SELECT lonnymq.message_fail(:r2, :r2tok, 'again');
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.id IN (:r1, :r2) AND m.position IS NOT NULL) || ' ' || pg_temp.misplaced(),
    '2 0',
    'a defer to 1970 and an immediate retry are ready, at or above the bound'
);
SELECT is(
    (SELECT string_agg(convert_from(d.content, 'UTF8'), ',') FROM lonnymq.message_dequeue(60000, 4, 'r') AS d),
    'r1,r3,r4,r2',
    'and delivered in (dequeue_at, id) order: the one deferred to 1970 first, the retry last'
);
SELECT count(lonnymq.message_complete(m.id, m.num_attempts)) FROM lonnymq.message AS m WHERE m.is_locked;

-- ---------------------------------------------------------------- a held snapshot
-- Another session holds a snapshot (REPEATABLE READ, with an xid) while 600
-- messages are taken and completed: their index entries stay, and a take
-- that started at the beginning of the round order would step over them.
SELECT count(*) FROM lonnymq.message_create_batch('k', array_fill('k'::bytea, ARRAY[1000]));
\if :has_dblink
SELECT dblink_connect('lmq_holder', :'conninfo');
SELECT dblink_exec('lmq_holder', 'BEGIN ISOLATION LEVEL REPEATABLE READ');
SELECT x FROM dblink('lmq_holder', 'SELECT pg_current_xact_id()::text') AS t (x text);
SELECT pg_temp.marks() AS before_hold \gset
\o /dev/null
SELECT 'SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000) AS d'
FROM generate_series(1, 600) \gexec
\o
CREATE TEMP TABLE held AS SELECT * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000) $$);
SELECT ok(
    (SELECT m[2] > (:'before_hold'::bigint[])[2] FROM pg_temp.marks() AS m),
    'a held snapshot does not stop the marks'
);
SELECT cmp_ok((SELECT idx FROM held), '<=', 60::bigint,
    'under it, a take reads at most 60 index entries');
SELECT cmp_ok(
    (SELECT idx FROM pg_temp.lmq_cost($$
        SELECT count(*) FROM (SELECT r.position FROM lonnymq.message AS r WHERE r.position >= 0 ORDER BY r.position LIMIT 1) AS f $$)),
    '>=', 600::bigint,
    'where a read of the round order from its beginning steps over the 600 consumed entries the snapshot keeps'
);
SELECT diag('a take under a held snapshot: idx=' || idx || ' seq=' || seq) FROM held;
SELECT dblink_exec('lmq_holder', 'COMMIT');
SELECT dblink_disconnect('lmq_holder');
\else
SELECT skip('dblink is not available', 3);
\endif

-- ---------------------------------------------------------------- a producer in flight
-- Another session creates a message and keeps its transaction open while
-- 100 takes try to raise the marks: the mark stays at or below its place,
-- and once it commits the message is delivered.
\if :has_dblink
SELECT dblink_connect('lmq_writer', :'conninfo');
SELECT dblink_exec('lmq_writer', 'BEGIN');
SELECT x FROM dblink('lmq_writer', $$ SELECT lonnymq.message_create('w', 'in flight')::text $$) AS t (x text);
SELECT p AS in_flight FROM dblink('lmq_writer', $$ SELECT position FROM lonnymq.message WHERE channel = 'w' $$) AS t (p bigint) \gset
\o /dev/null
SELECT 'SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, ''k'') AS d'
FROM generate_series(1, 100) \gexec
\o
SELECT ok(
    (SELECT m[2] <= :in_flight FROM pg_temp.marks() AS m),
    'the position mark stays at or below the place of a message whose producer is in flight'
);
SELECT dblink_exec('lmq_writer', 'COMMIT');
SELECT dblink_disconnect('lmq_writer');
\o /dev/null
SELECT 'SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, ''k'') AS d'
FROM generate_series(1, 40) \gexec
\o
SELECT is(pg_temp.lmq_take(60000, 'w'), 'w:in flight', 'committed, it is delivered');
\else
SELECT skip('dblink is not available', 2);
\endif

-- ---------------------------------------------------------------- the rest
\o /dev/null
SELECT
    'SELECT count(lonnymq.message_complete(m.id, m.num_attempts)) FROM lonnymq.message AS m WHERE m.is_locked',
    'SELECT count(*) FROM lonnymq.message_dequeue(60000, 1000)'
FROM generate_series(1, 3) \gexec
\o
SELECT is((SELECT count(*) FROM lonnymq.message WHERE NOT is_locked), 0::bigint, 'every message was delivered');
SELECT count(lonnymq.message_complete(m.id, m.num_attempts)) FROM lonnymq.message AS m WHERE m.is_locked;
SELECT lonnymq.channel_drop('r');

SELECT * FROM finish();
SELECT setval('lonnymq.position_mark_seq', 0, TRUE), setval('lonnymq.due_mark_seq', -9223372036854775808, TRUE);
\if :create_dblink
DROP EXTENSION dblink;
\endif
