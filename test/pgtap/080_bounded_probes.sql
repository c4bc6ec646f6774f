\ir include/setup.psql
-- The rule that defines lonnymq: every hot call is a bounded number of index
-- probes, whatever the backlog.  Pathological data (DESIGN.md (a)-(d)) is
-- loaded in bulk; then each hot call is run once, as a transaction of its
-- own, and that transaction's statistics (pg_stat_xact_*) show how many
-- index entries it read and that it scanned no table sequentially.  A scan
-- that grew with the data would read thousands of entries here.
--
-- In 0.11.0 the take is the first ready positions of message_ready_ix from
-- the position mark; saturated and rate-limited channels hold their
-- messages out of it (admission), future messages and locks wait in
-- message_due_ix, and a dequeue promotes at most 8 due messages (expired
-- locks here: 50,000 of them are due, so every dequeue below pays for its
-- promotions).  The queue is committed and every call below is a
-- transaction of its own, as a worker's: the marks rise as in production
-- (probes.psql, lmq_committed_begin), and what this file added is removed
-- at its end.

\ir include/probes.psql
SELECT pg_temp.lmq_committed_begin();
\ir include/pathological.psql

SELECT plan(48);
COMMIT;

SELECT cmp_ok((SELECT count(*) FROM lonnymq.message), '>=', 500000::bigint, 'the pathological queue holds 500,000+ messages');
SELECT is(
    (SELECT count(*) FROM lonnymq.channel WHERE max_concurrency IS NOT NULL OR release_interval_ms > 0),
    6001::bigint,
    '6,000 channels saturated (max_concurrency) or rate-limited (release_interval_ms), and satrecover'
);
SELECT is(
    (SELECT count(*) FROM lonnymq.message WHERE position IS NOT NULL), 100001::bigint,
    'of all those messages, only the backlog''s 100,000 and target''s one are ready'
);
-- The fixture is the model's: what admission counts is what is admitted.
SELECT is(
    (SELECT count(*) FROM lonnymq.channel AS c
     WHERE c.num_admitted <> (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel_id = c.id AND m.is_admitted)),
    0::bigint,
    'every configured channel counts exactly its admitted messages'
);

-- Warm the plan caches (ANALYZE invalidated them), so that what is measured
-- is the steady-state call and not the planner's one-off look at the
-- tables: a channel of its own, created, taken by name (the take's one
-- statement serves both ways; the due expired locks make it promote 8 of
-- them, satrecover's the oldest), completed.
SELECT lonnymq.message_create('warm', 'w');
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(1000, 1, 'warm') AS d;
SELECT lonnymq.message_create('warm', 'w');
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(1000, 1, 'warm') AS d;

-- The round being served: backlog's, target's, and the first places of the
-- expired locks just promoted (satrecover's, and locks'), each channel one
-- place in it.  Each call is measured on its own.
CREATE TEMP TABLE costs (what text, result text, seq bigint, idx bigint);

INSERT INTO costs SELECT 'dequeue: round 1, 1st', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);
INSERT INTO costs SELECT 'dequeue: round 1, 2nd', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);
INSERT INTO costs SELECT 'dequeue: round 1, 3rd', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);
INSERT INTO costs SELECT 'dequeue: round 1, 4th', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);
INSERT INTO costs SELECT 'dequeue: round 2, 1st', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);
INSERT INTO costs SELECT 'dequeue: round 2, 2nd', * FROM pg_temp.lmq_cost(
    $$ SELECT d.channel || ' ' || d.is_recovered FROM lonnymq.message_dequeue(60000) AS d $$);

SELECT is(
    (SELECT array_agg(result ORDER BY result) FROM costs WHERE what LIKE 'dequeue: round 1%'),
    ARRAY['backlog false', 'locks true', 'satrecover true', 'target false'],
    'one round: the backlog, the one ordinary channel past 6,000 saturated/rate-limited channels, 100,000 '
    'future messages and 200,000 locks, an expired lock among 100,000, and the saturated channel''s own '
    'expired lock (not one of its 20,000 held messages), one delivery each'
);
SELECT is(
    (SELECT array_agg(result ORDER BY result) FROM costs WHERE what LIKE 'dequeue: round 2%'),
    ARRAY['backlog false', 'locks true'],
    'then the next round comes round to the backlog and the recovered locks again, and only to them'
);
SELECT is(
    (SELECT count(*) FROM lonnymq.message WHERE channel = 'satrecover' AND is_locked),
    1::bigint,
    'satrecover, at its max_concurrency, holds its one lock and delivered nothing else'
);

-- Other hot calls.
SELECT d.id AS bid, d.num_attempts AS btok FROM lonnymq.message_dequeue(60000, 1, 'backlog') AS d \gset
SELECT d.id AS lid, d.num_attempts AS ltok FROM lonnymq.message_dequeue(60000, 1, 'backlog') AS d \gset
SELECT d.id AS tid, d.num_attempts AS ttok FROM lonnymq.message_dequeue(60000, 1, 'locks') AS d \gset
SELECT m.id AS sid, m.num_attempts AS stok FROM lonnymq.message AS m WHERE m.channel = 'satrecover' AND m.is_locked \gset

INSERT INTO costs SELECT 'dequeue: p_channel saturated', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'sat17') $$);
INSERT INTO costs SELECT 'dequeue: p_channel rate-limited', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'rate17') $$);
INSERT INTO costs SELECT 'dequeue: p_channel all locked', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'alllocked') $$);
INSERT INTO costs SELECT 'create: busy channel', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('backlog', 'new') $$);
INSERT INTO costs SELECT 'create: waiting channel', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('future7', 'new') $$);
INSERT INTO costs SELECT 'create: channel of 100,000 locks', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('alllocked', 'new') $$);
INSERT INTO costs SELECT 'create: saturated channel', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('sat9', 'new', -1) $$);
INSERT INTO costs SELECT 'create: rate-limited channel', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('rate9', 'new') $$);
INSERT INTO costs SELECT 'create: new channel', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('brand-new', 'new') $$);
INSERT INTO costs SELECT 'complete', * FROM pg_temp.lmq_cost(format($$ SELECT lonnymq.message_complete(%s, %s) $$, :bid, :btok));
INSERT INTO costs SELECT 'complete: saturated channel admits', * FROM pg_temp.lmq_cost(format($$ SELECT lonnymq.message_complete(%s, %s) $$, :sid, :stok));
SELECT count(*) FILTER (WHERE position IS NOT NULL) || ' ready, ' || count(*) FILTER (WHERE is_admitted) || ' admitted, '
    || count(*) FILTER (WHERE is_held) || ' held' AS satrecover_after
FROM lonnymq.message WHERE channel = 'satrecover' \gset
INSERT INTO costs SELECT 'defer', * FROM pg_temp.lmq_cost(format($$ SELECT lonnymq.message_defer(%s, %s, NULL, 's') $$, :lid, :ltok));
INSERT INTO costs SELECT 'heartbeat', * FROM pg_temp.lmq_cost(format($$ SELECT lonnymq.message_heartbeat(%s, %s, 120000) $$, :tid, :ttok));
INSERT INTO costs SELECT 'dequeue: batch of 10', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 10) $$);

SELECT is((SELECT result FROM costs WHERE what = 'dequeue: p_channel saturated'), '0', 'a saturated channel gives nothing');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: p_channel rate-limited'), '0', 'nor does a rate-limited one');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: p_channel all locked'), '0', 'nor a channel whose messages are all locked');
SELECT is(
    (SELECT array_agg(result IS NOT NULL ORDER BY what) FROM costs WHERE what LIKE 'create:%'),
    array_fill(TRUE, ARRAY[6]),
    'every create stored its message'
);
SELECT is(
    (SELECT m.position IS NULL AND NOT m.is_locked FROM lonnymq.message AS m WHERE m.channel = 'sat9' AND m.content = 'new'),
    TRUE,
    'the saturated channel does not make its new message ready (it waits for admission)'
);
SELECT is((SELECT result FROM costs WHERE what = 'complete'), 'true', 'complete succeeded');
SELECT is((SELECT result FROM costs WHERE what = 'complete: saturated channel admits'), 'true', 'so did the saturated channel''s');
-- (Its takes claim, 0.15.0: the completion puts its next message back in
-- the round order unclaimed, and its take claims.)
SELECT is(:'satrecover_after'::text, '1 ready, 0 admitted, 19999 held', 'which released its next message, and only one');
SELECT is((SELECT result FROM costs WHERE what = 'defer'), 'true', 'defer succeeded');
SELECT is((SELECT result FROM costs WHERE what = 'heartbeat'), 'true', 'heartbeat succeeded');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: batch of 10'), '10', 'a batch of 10 is served');

SELECT is(
    (SELECT string_agg(what || ' seq=' || seq, ', ') FROM costs WHERE seq <> 0),
    NULL,
    'no hot call scans a table sequentially'
);
-- 60, as in 0.10.1.  A dequeue here promotes 8 expired locks (each a
-- probe of its channel's configuration and of its places) before it takes.
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
-- Two dequeues, each tagged with whether it raised the marks (a raise
-- records the deliveries counted in marks_delivered_seq): at most one is
-- on the marks' turn (it comes every 8 deliveries, _marks_turn_deliveries).
-- The one on it also raises the marks, whose read of the first ready entry
-- steps over the entries consumed since the marks last moved, and of the
-- due index over what its own promotion just took (here the first raise
-- of the test that moves them, 13 deliveries after the last: 67 entries
-- against the other call's 44).
SELECT pg_sequence_last_value('lonnymq.marks_delivered_seq') AS raised0 \gset
INSERT INTO costs2 SELECT 'dequeue', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'backlog') $$);
SELECT pg_sequence_last_value('lonnymq.marks_delivered_seq') AS raised1 \gset
INSERT INTO costs2 SELECT 'dequeue, the next', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'backlog') $$);
SELECT pg_sequence_last_value('lonnymq.marks_delivered_seq') AS raised2 \gset
INSERT INTO costs2 SELECT 'create', * FROM pg_temp.lmq_cost($$ SELECT lonnymq.message_create('future8', 'new') $$);
CREATE TEMP TABLE raised AS
SELECT 'dequeue' AS what, :raised1 <> :raised0 AS raised
UNION ALL SELECT 'dequeue, the next', :raised2 <> :raised1;
SELECT is((SELECT string_agg(result, ',') FROM costs2 WHERE what LIKE 'dequeue%'), '1,1', 'two later dequeues from the backlog');
SELECT cmp_ok((SELECT count(*) FROM raised WHERE raised), '<=', 1::bigint, 'at most one of them on the marks'' turn');
SELECT cmp_ok(
    (SELECT max(c.idx) FROM costs2 AS c JOIN raised AS r USING (what) WHERE NOT r.raised), '<=', 60::bigint,
    'one that does not raise the marks reads at most 60 index entries');
SELECT cmp_ok(
    (SELECT coalesce(max(c.idx), 0) FROM costs2 AS c JOIN raised AS r USING (what) WHERE r.raised), '<=', 80::bigint,
    'and one that raises them at most 80');
SELECT cmp_ok((SELECT idx FROM costs2 WHERE what = 'create'), '<=', 40::bigint, 'a create into a waiting channel at most 40');
SELECT is((SELECT sum(seq) FROM costs2), 0::numeric, 'without sequential scans');

-- A burst into saturated channels (issue 40): one message into each of 300
-- of the 3,000 saturated channels.  Each create finds its channel full and
-- holds its message at once (_channel_hold_try): none waits in
-- message_due_ix for a dequeue to promote it, 8 a call (before 0.15.0 every
-- later dequeue paid 8 such promotions until the burst was worked off), so
-- the next dequeue reads what a quiet one does.
SELECT count(lonnymq.message_create('sat' || g, 'burst')) FROM generate_series(1, 300) AS g;
SELECT is(
    (SELECT count(*) FILTER (WHERE is_held) || ' held, ' || count(*) FILTER (WHERE NOT is_held) || ' not'
     FROM lonnymq.message WHERE channel LIKE 'sat%' AND content = 'burst'),
    '300 held, 0 not',
    'a create into a saturated channel holds its message at once');
INSERT INTO costs2 SELECT 'dequeue after the burst', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'backlog') $$);
SELECT cmp_ok((SELECT idx FROM costs2 WHERE what = 'dequeue after the burst'), '<=', 80::bigint,
    'and the next dequeue reads at most 80 index entries, as before the burst');

-- complete_dequeue: a complete and a dequeue, one call (0.10.0), in a
-- channel of its own.
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
INSERT INTO costs SELECT 'dequeue: batch of 1000, one channel', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1000, 'backlog') $$);
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: batch of 1000, one channel'), '1000', 'a batch of 1000 from the backlog is served');
SELECT cmp_ok((SELECT idx FROM costs WHERE what = 'dequeue: batch of 1000, one channel'), '<=', 3000::bigint,
    'a batch of 1000 from one channel reads at most 3 index entries per message');
SELECT is((SELECT seq FROM costs WHERE what = 'dequeue: batch of 1000, one channel'), 0::bigint, 'without sequential scans');

-- The places a batch took stay in the index until VACUUM, and behind the
-- marks only from the next raise on (the raise after a batch cannot pass
-- the batch's own first place: a rollback would make it ready again).
-- Whoever reads across them next steps over their entries once (and marks
-- them dead, so that nobody else does): measured here, not bounded (at most
-- a batch's worth), and done before the next batch is measured by a plain
-- read of the round order, so that each batch is measured on its own.
INSERT INTO costs SELECT 'dequeue: the first after a batch of 1000', * FROM pg_temp.lmq_cost(
    $$ SELECT count(*) FROM lonnymq.message_dequeue(60000) $$);
SELECT count(*) FROM (
    SELECT m.position FROM lonnymq.message AS m
    WHERE m.position >= pg_sequence_last_value('lonnymq.position_mark_seq')
    ORDER BY m.position LIMIT 5000
) AS r;

-- A batch of 1000 from every channel: the take walks no saturated,
-- rate-limited or future channel.
INSERT INTO costs SELECT 'dequeue: batch of 1000', * FROM pg_temp.lmq_cost($$ SELECT count(*) FROM lonnymq.message_dequeue(60000, 1000) $$);
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: batch of 1000'), '1000', 'a batch of 1000 is served');
SELECT cmp_ok((SELECT idx FROM costs WHERE what = 'dequeue: batch of 1000'), '<=', 3000::bigint,
    'and reads at most 3 index entries per message');
SELECT is((SELECT seq FROM costs WHERE what = 'dequeue: batch of 1000'), 0::bigint, 'without sequential scans');
INSERT INTO costs SELECT 'dequeue: the first after a batch of 1000, again', * FROM pg_temp.lmq_cost(
    $$ SELECT count(*) FROM lonnymq.message_dequeue(60000) $$);

-- Priority within a channel (a dequeue_at in the past): such a message is
-- early (placed at the back although it sorts first) and the channel's
-- next turn delivers it; the turn's holder takes its place.  A channel of
-- its own, 2,000 ready messages, then 20 priority messages.
SELECT count(*) FROM lonnymq.message_create_batch('prio', array_fill('p'::bytea, ARRAY[2000]));
INSERT INTO costs SELECT 'create: priority, busy channel', * FROM pg_temp.lmq_cost(
    $$ SELECT lonnymq.message_create('prio', 'urgent1', -1) $$);
SELECT count(lonnymq.message_create('prio', convert_to('urgent' || g, 'UTF8'), -g)) FROM generate_series(2, 20) AS g;
INSERT INTO costs SELECT 'dequeue: a channel with 20 priority messages', * FROM pg_temp.lmq_cost(
    $$ SELECT string_agg(convert_from(d.content, 'UTF8'), ',') FROM lonnymq.message_dequeue(60000, 1, 'prio') AS d $$);
INSERT INTO costs SELECT 'dequeue: batch of 100, a channel with priority messages', * FROM pg_temp.lmq_cost(
    $$ SELECT string_agg(convert_from(d.content, 'UTF8'), ',') FROM lonnymq.message_dequeue(60000, 100, 'prio') AS d $$);
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: a channel with 20 priority messages'), 'urgent20',
    'the most urgent priority message is delivered first');
SELECT is(
    (SELECT result FROM costs WHERE what = 'dequeue: batch of 100, a channel with priority messages'),
    (SELECT string_agg(x, ',') FROM (
        SELECT 'urgent' || g AS x FROM generate_series(19, 1, -1) AS g
        UNION ALL SELECT 'p' FROM generate_series(1, 81)) AS e),
    'then the other 19 in (dequeue_at, id) order, then the channel''s other messages'
);
SELECT cmp_ok((SELECT idx FROM costs WHERE what = 'create: priority, busy channel'), '<=', 60::bigint,
    'a priority create reads at most 60 index entries');
SELECT cmp_ok((SELECT idx FROM costs WHERE what = 'dequeue: a channel with 20 priority messages'), '<=', 60::bigint,
    'a take from a channel with 20 priority messages reads at most 60');
-- Each turn looks for an early message of its channel that sorts before its
-- holder (here every turn finds one: one entry), so a take from a channel
-- with priority messages reads its turn, that entry and the message, and
-- _message_turns_resolve the early messages it gives turns to.
SELECT cmp_ok((SELECT idx FROM costs WHERE what = 'dequeue: batch of 100, a channel with priority messages'), '<=', 400::bigint,
    'a batch of 100 from it reads at most 4 index entries per message');

-- A wake (_channel_wake): a limited channel's admission walk that may have
-- missed a held message (here outside READ COMMITTED; in production also
-- while a producer holds the channel's hold guard) and had room left
-- leaves one, for a dequeue's promotion to walk the channel again; one per
-- channel, the pending one found by its id (channel.wake_id), not by a walk
-- of the channel's messages that are not ready: here 20,000 future ones.
SELECT lonnymq.channel_set('wakeprobe', p_max_concurrency => 5);
SELECT count(*) FROM generate_series(0, 1) AS k, lonnymq.message_create_batch(
    'wakeprobe', array_fill('future'::bytea, ARRAY[10000]),
    (SELECT array_agg(:t0 + 3600000 + k * 10000 + g ORDER BY g) FROM generate_series(1, 10000) AS g));
SELECT count(*) FROM lonnymq.message_create_batch('wakeprobe', array_fill('now'::bytea, ARRAY[2]));
SELECT array_agg(d.id) AS wids, array_agg(d.num_attempts) AS wtoks
FROM lonnymq.message_dequeue(60000, 2, 'wakeprobe') AS d \gset
-- (Each statement its own transaction, at REPEATABLE READ.)
SET default_transaction_isolation = 'repeatable read';
INSERT INTO costs SELECT 'complete, not READ COMMITTED: leaves a wake', * FROM pg_temp.lmq_cost(format(
    $$ SELECT lonnymq.message_complete(%s, %s)::text $$, (:'wids'::bigint[])[1], (:'wtoks'::integer[])[1]));
INSERT INTO costs SELECT 'complete, not READ COMMITTED: a wake pending', * FROM pg_temp.lmq_cost(format(
    $$ SELECT lonnymq.message_complete(%s, %s)::text $$, (:'wids'::bigint[])[2], (:'wtoks'::integer[])[2]));
RESET default_transaction_isolation;
SELECT is(
    (SELECT string_agg(result, ',' ORDER BY what) FROM costs WHERE what LIKE 'complete, not READ COMMITTED%'),
    'true,true',
    'two completions in a limited channel outside READ COMMITTED');
SELECT cmp_ok((SELECT max(idx) FROM costs WHERE what LIKE 'complete, not READ COMMITTED%'), '<=', 60::bigint,
    'each reads at most 60 index entries, past the channel''s 20,000 messages that are not ready');
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m JOIN lonnymq.channel AS c ON c.name = m.channel
     WHERE m.channel = 'wakeprobe' AND m.schedule = '' AND m.id = c.wake_id),
    1::bigint,
    'and leave one wake, which the channel row names, and no second while it is pending');

-- Report the measured costs in the TAP output.
SELECT diag(string_agg(format('%-56s seq=%s idx=%s', what, seq, idx), E'\n' ORDER BY what)) FROM costs;
SELECT diag(string_agg(format('%-56s seq=%s idx=%s (second round)', what, seq, idx), E'\n' ORDER BY what)) FROM costs2;

SELECT * FROM finish();
SELECT pg_temp.lmq_committed_end();
