\ir include/setup.psql
-- The rule that defines lonnymq: every hot call is a bounded number of index
-- probes, whatever the backlog.  Pathological data (DESIGN.md (a)-(d)) is
-- loaded in bulk; then each hot call is run once and this transaction's own
-- statistics (pg_stat_xact_*) show how many index entries it read and that it
-- scanned no table sequentially.  A scan that grew with the data would read
-- thousands of entries here.

\ir include/probes.psql
\ir include/pathological.psql

SELECT plan(27);

SELECT cmp_ok((SELECT count(*) FROM lonnymq.message), '>=', 400000::bigint, 'the pathological queue holds 400,000+ messages');
SELECT cmp_ok((SELECT count(*) FROM lonnymq.channel), '>=', 7000::bigint, 'in 7,000+ channels, 6,000 of them saturated or rate-limited');

-- Warm the plan caches (ANALYZE invalidated them) with a channel at the
-- front of the rotation, so that what is measured is the steady-state call
-- and not the planner's one-off look at the tables.
INSERT INTO lonnymq.channel (name, next_at, turn, wait_at, created_at)
VALUES ('warm', :t0 - 1000, nextval('lonnymq.channel_turn_seq'), NULL, :t0);
INSERT INTO lonnymq.message (channel_id, dequeue_at, created_at, content)
SELECT c.id, :t0 - 1000, :t0, 'w' FROM lonnymq.channel AS c WHERE c.name = 'warm';
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(1000) AS d;
SELECT lonnymq.message_create('warm', 'w');
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(1000, 1, 'warm') AS d;

-- Dequeue in rotation order: alllocked (nothing deliverable), backlog,
-- locks, satrecover, target.  Each call is measured on its own.
CREATE TEMP TABLE costs (what text, result text, seq bigint, idx bigint);

INSERT INTO costs SELECT 'dequeue: backlog', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);
INSERT INTO costs SELECT 'dequeue: expired lock among 100k locks', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);
INSERT INTO costs SELECT 'dequeue: saturated channel recovering', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);
INSERT INTO costs SELECT 'dequeue: past everything', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);
INSERT INTO costs SELECT 'dequeue: rotation comes round', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);

SELECT is((SELECT result FROM costs WHERE what = 'dequeue: backlog'), 'backlog false', 'the backlog channel is served');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: expired lock among 100k locks'), 'locks true',
    'an expired lock is recovered among 100,000 locks');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: saturated channel recovering'), 'satrecover true',
    'a saturated channel delivers its expired lock, not its 20,000 ready messages');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: past everything'), 'target false',
    'the one ordinary channel is found past 6,000 saturated/rate-limited channels, 100,000 future messages, 100,000 locks');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: rotation comes round'), 'backlog false',
    'then the rotation comes round to the backlog again');

-- Other hot calls.
SELECT d.id AS bid, d.num_attempts AS btok FROM lonnymq.message_dequeue(60000, 1, 'backlog') AS d \gset
SELECT d.id AS lid, d.num_attempts AS ltok FROM lonnymq.message_dequeue(60000, 1, 'locks') AS d \gset
SELECT d.id AS tid, d.num_attempts AS ttok FROM lonnymq.message_dequeue(60000, 1, 'backlog') AS d \gset

INSERT INTO costs SELECT 'create: busy channel', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('backlog', 'new') $$);
INSERT INTO costs SELECT 'create: waiting channel', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('future7', 'new') $$);
INSERT INTO costs SELECT 'create: saturated channel', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('sat9', 'new', -1) $$);
INSERT INTO costs SELECT 'create: new channel', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('brand-new', 'new') $$);
INSERT INTO costs SELECT 'complete', * FROM pg_temp.lmq_cost(format($$ SELECT lonnymq.message_complete(%s, %s) $$, :bid, :btok));
INSERT INTO costs SELECT 'defer', * FROM pg_temp.lmq_cost(format($$ SELECT lonnymq.message_defer(%s, %s, NULL, 's') $$, :lid, :ltok));
INSERT INTO costs SELECT 'heartbeat', * FROM pg_temp.lmq_cost(format($$ SELECT lonnymq.message_heartbeat(%s, %s, 120000) $$, :tid, :ttok));
INSERT INTO costs SELECT 'dequeue: p_channel saturated', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'sat17') $$);
INSERT INTO costs SELECT 'dequeue: p_channel all locked', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'alllocked') $$);
INSERT INTO costs SELECT 'dequeue: batch of 10', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 10) $$);

SELECT is((SELECT result FROM costs WHERE what = 'complete'), 'true', 'complete succeeded');

SELECT is((SELECT result FROM costs WHERE what = 'defer'), 'true', 'defer succeeded');
SELECT is((SELECT result FROM costs WHERE what = 'heartbeat'), 'true', 'heartbeat succeeded');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: p_channel saturated'), '0', 'a saturated channel gives nothing');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: batch of 10'), '10', 'a batch of 10 is served');

SELECT is(
    (SELECT string_agg(what || ' seq=' || seq, ', ') FROM costs WHERE seq <> 0),
    NULL,
    'no hot call scans a table sequentially'
);
-- 60, not 40 as in 0.2.0: since 0.3.0 a single-message dequeue first probes
-- for its fast path (the rotation's first two eligible channels, the due
-- schedules and wake-ups) and, when that does not apply, goes the general
-- way, which probes the rotation again to lock its front; since 0.4.0 it
-- first tries to serve the front channel in one statement, so a front
-- channel with nothing deliverable ("rotation comes round", 59 here) costs
-- one more attempt before the general way.  Here every call runs in one
-- transaction, whose own superseded channel rows the index probes still
-- walk; in autocommit each of these probes reads 2 or 3 entries.
SELECT is(
    (SELECT string_agg(what || ' idx=' || idx, ', ') FROM costs WHERE what NOT LIKE '%batch%' AND idx > 60),
    NULL,
    'every single-message hot call reads at most 60 index entries'
);
SELECT is(
    (SELECT string_agg(what || ' idx=' || idx, ', ') FROM costs WHERE what LIKE '%batch%' AND idx > 400),
    NULL,
    'a batch of 10 reads at most 40 index entries per message'
);

-- The same calls in a second round cost the same: they do not degrade as
-- the queue is worked.
CREATE TEMP TABLE costs2 AS SELECT * FROM costs WHERE FALSE;
INSERT INTO costs2 SELECT 'dequeue', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'backlog') $$);
INSERT INTO costs2 SELECT 'create', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('future8', 'new') $$);
SELECT is((SELECT result FROM costs2 WHERE what = 'dequeue'), '1', 'a later dequeue from the backlog');
SELECT cmp_ok((SELECT idx FROM costs2 WHERE what = 'dequeue'), '<=', 40::bigint, 'reads at most 40 index entries');
SELECT cmp_ok((SELECT idx FROM costs2 WHERE what = 'create'), '<=', 40::bigint, 'and so does a create into a waiting channel');
SELECT is((SELECT seq FROM costs2 WHERE what = 'dequeue') + (SELECT seq FROM costs2 WHERE what = 'create'), 0::bigint, 'without sequential scans');

-- complete_dequeue: a complete and a dequeue, one call (0.10.0), in a
-- channel of its own: the entries of the rows it locks stay visible to
-- this transaction's later scans of the same channel.
SELECT count(*) FROM lonnymq.message_create_batch('worker', array_fill('w'::bytea, ARRAY[30]));
SELECT d.id AS cid, d.num_attempts AS ctok FROM lonnymq.message_dequeue(60000, 1, 'worker') AS d \gset
SELECT array_agg(d.id) AS cids, array_agg(d.num_attempts) AS ctoks FROM lonnymq.message_dequeue(60000, 10, 'worker') AS d \gset
INSERT INTO costs SELECT 'complete_dequeue', * FROM pg_temp.lmq_cost(format(
    $$ SELECT count(*) FROM lonnymq.message_complete_dequeue(ARRAY[%s]::bigint[], ARRAY[%s], 60000, 1, 'worker') $$,
    :cid, :ctok));
INSERT INTO costs SELECT 'complete_dequeue: batch of 10', * FROM pg_temp.lmq_cost(format(
    $$ SELECT count(*) FROM lonnymq.message_complete_dequeue(%L, %L, 60000, 10, 'worker') $$, :'cids', :'ctoks'));
SELECT is((SELECT result FROM costs WHERE what = 'complete_dequeue'), '1', 'complete_dequeue delivers one');
SELECT is(
    (SELECT count(*) FROM lonnymq.message WHERE id = :cid OR id = any(:'cids'::bigint[])), 0::bigint,
    'and completed what it was given, one and a batch of 10');
SELECT cmp_ok((SELECT idx FROM costs WHERE what = 'complete_dequeue'), '<=', 80::bigint,
    'complete_dequeue reads at most 80 index entries: a complete and a dequeue');
SELECT cmp_ok((SELECT idx FROM costs WHERE what = 'complete_dequeue: batch of 10'), '<=', 300::bigint,
    'a batch of 10 at most 30 per message');
SELECT is((SELECT sum(seq) FROM costs WHERE what LIKE 'complete_dequeue%'), 0::numeric, 'without sequential scans');

-- A batch of 1000 from one channel is one statement, not 1000 probes.
-- (Measured last: within this one transaction, the index entries of the rows
-- it locks stay visible to later scans of the same channel until the
-- transaction ends, which a real worker's transaction would have done.)
INSERT INTO costs SELECT 'dequeue: batch of 1000, one channel', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1000, 'backlog') $$);
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: batch of 1000, one channel'), '1000', 'a batch of 1000 from the backlog is served');
SELECT cmp_ok((SELECT idx FROM costs WHERE what = 'dequeue: batch of 1000, one channel'), '<=', 3000::bigint,
    'a batch of 1000 from one channel reads at most 3 index entries per message');
SELECT is((SELECT seq FROM costs WHERE what = 'dequeue: batch of 1000, one channel'), 0::bigint, 'without sequential scans');

-- Report the measured costs in the TAP output.
SELECT diag(string_agg(format('%-40s seq=%s idx=%s', what, seq, idx), E'\n' ORDER BY what)) FROM costs;

SELECT * FROM finish();
ROLLBACK;
