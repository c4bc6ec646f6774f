\ir include/setup.psql
-- The calls of batches, keys, retries and dead letters, history and
-- schedules (the calls 0.2.0 added) keep the rule: on the pathological queue
-- (500,000+ messages, 100,000 dead letters, 100,000 history rows, 100,000 key
-- claims half of them expired, 10,000 schedules) each call reads a bounded
-- number of index entries and scans no table sequentially (see 080 for the
-- method: the queue is committed, each call is a transaction of its own,
-- and what this file adds is removed at its end).

\ir include/probes.psql
SELECT pg_temp.lmq_committed_begin();
\ir include/pathological.psql

SELECT plan(24);
COMMIT;

SELECT lonnymq.channel_set('poison', p_max_attempts => 2, p_max_concurrency => 5);
SELECT lonnymq.channel_set('retry', p_max_attempts => 1);

-- Warm the plan caches (ANALYZE invalidated them), as in 080.
SELECT lonnymq.message_create('warm', 'w', NULL, 'warm-key');
SELECT lonnymq.message_create_batch('warm', ARRAY['a', 'b']::bytea[], NULL, ARRAY['k1', 'k2']);
SELECT lonnymq.message_complete_batch(array_agg(d.id), array_agg(d.num_attempts))
FROM lonnymq.message_dequeue(1000, 10, 'warm') AS d;
SELECT lonnymq.message_create('warm', 'w');
SELECT lonnymq.message_fail(d.id, d.num_attempts, 'warm') FROM lonnymq.message_dequeue(1000, 1, 'warm') AS d;
SELECT lonnymq.message_cancel(m.id) FROM lonnymq.message AS m WHERE m.channel = 'warm';
-- A schedule of the warm channel, due: the first dequeue plans _schedule_next.
SELECT lonnymq.schedule_set('warm', 'warm', 's', 3600000, :t0 - 10);
SELECT count(*) FROM lonnymq.message_dequeue(1000, 1, 'warm');
SELECT lonnymq.history_prune(86400000);
SELECT lonnymq.message_create('poison', 'w');
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(1000, 1, 'poison') AS d;

-- A poisoned lock: it expired after its last allowed attempt (its second
-- delivery, after one failure), with a ready message of its channel behind
-- it.  The dequeues above promoted the oldest expired locks and raised the
-- due mark: the poisoned lock's expiry is the due mark, so it is the oldest
-- due message (no scheduled or locked message lies below the due mark).
INSERT INTO lonnymq.message (channel, channel_id, dequeue_at, is_locked, num_attempts, num_failures, locked_by, is_admitted, created_at, content)
SELECT 'poison', lonnymq._channel_id('poison'), pg_sequence_last_value('lonnymq.due_mark_seq'), TRUE, 2, 1, session_user::regrole, TRUE, pg_sequence_last_value('lonnymq.due_mark_seq'), 'poison';
UPDATE lonnymq.channel SET num_admitted = num_admitted + 1 WHERE name = 'poison';
SELECT lonnymq.message_create('poison', 'good', :t0 - 5);

CREATE TEMP TABLE costs (what text, result text, seq bigint, idx bigint);

INSERT INTO costs SELECT 'create: new key', * FROM pg_temp.lmq_cost(
    $$ SELECT (lonnymq.message_create('keyed', 'new', NULL, 'fresh-key') IS NOT NULL)::text $$);
SELECT k.message_id AS holder FROM lonnymq.message_key AS k
WHERE k.channel_id = lonnymq._channel_id('keyed') AND k.key = 'key-25000' \gset
INSERT INTO costs SELECT 'create: duplicate key', * FROM pg_temp.lmq_cost(
    format($$ SELECT (lonnymq.message_create('keyed', 'dup', NULL, 'key-25000') = %s)::text $$, :holder));
INSERT INTO costs SELECT 'create batch of 100', * FROM pg_temp.lmq_cost(
    $$ SELECT count(*)::text FROM lonnymq.message_create_batch(
        'backlog', array_fill('b'::bytea, ARRAY[100])) $$);
INSERT INTO costs SELECT 'create batch of 100, keyed', * FROM pg_temp.lmq_cost(
    $$ SELECT count(*)::text FROM lonnymq.message_create_batch(
        'keyed', array_fill('b'::bytea, ARRAY[100]), NULL,
        ARRAY(SELECT 'batch-' || g FROM generate_series(1, 100) AS g)) $$);
-- The same batch again (a retried Spark partition): every key is held, so
-- each is found and resolved on its own.  (Until 0.13.0 each also deleted
-- two expired claims, walking past those the previous ones deleted: 10,503
-- index entries here.)
INSERT INTO costs SELECT 'create batch of 100, keyed, every key held', * FROM pg_temp.lmq_cost(
    $$ SELECT count(*)::text FROM lonnymq.message_create_batch(
        'keyed', array_fill('b'::bytea, ARRAY[100]), NULL,
        ARRAY(SELECT 'batch-' || g FROM generate_series(1, 100) AS g)) $$);
INSERT INTO costs SELECT 'dequeue: buries a poisoned lock', * FROM pg_temp.lmq_cost(
    $$ SELECT string_agg(convert_from(d.content, 'UTF8'), ',') FROM lonnymq.message_dequeue(60000, 1, 'poison') AS d $$);

CREATE TEMP TABLE taken AS SELECT d.id, d.num_attempts FROM lonnymq.message_dequeue(60000, 100, 'backlog') AS d;
INSERT INTO costs SELECT 'complete batch of 100', * FROM pg_temp.lmq_cost(
    $$ SELECT lonnymq.message_complete_batch(array_agg(t.id), array_agg(t.num_attempts))::text FROM taken AS t $$);

SELECT d.id AS rid, d.num_attempts AS rtok FROM lonnymq.message_dequeue(60000, 1, 'backlog') AS d \gset
INSERT INTO costs SELECT 'fail: retry', * FROM pg_temp.lmq_cost(
    format($$ SELECT lonnymq.message_fail(%s, %s, 'oops') $$, :rid, :rtok));
SELECT lonnymq.message_create('retry', 'r');
SELECT d.id AS did, d.num_attempts AS dtok FROM lonnymq.message_dequeue(60000, 1, 'retry') AS d \gset
INSERT INTO costs SELECT 'fail: dead', * FROM pg_temp.lmq_cost(
    format($$ SELECT lonnymq.message_fail(%s, %s, 'fatal') $$, :did, :dtok));
SELECT min(m.id) AS cid FROM lonnymq.message AS m WHERE m.channel = 'backlog' AND NOT m.is_locked \gset
INSERT INTO costs SELECT 'cancel', * FROM pg_temp.lmq_cost(format($$ SELECT lonnymq.message_cancel(%s)::text $$, :cid));

-- (Its occurrence due at the due mark: the oldest due entry, ahead of the
-- 50,000 expired locks that promotion takes 8 a call, oldest first.)
UPDATE lonnymq.schedule SET next_at = pg_sequence_last_value('lonnymq.due_mark_seq') WHERE name = 'sched5000';
UPDATE lonnymq.message
SET dequeue_at = pg_sequence_last_value('lonnymq.due_mark_seq'), created_at = pg_sequence_last_value('lonnymq.due_mark_seq')
WHERE id = (SELECT occurrence_id FROM lonnymq.schedule WHERE name = 'sched5000');
INSERT INTO costs SELECT 'dequeue: a schedule is due', * FROM pg_temp.lmq_cost(
    $$ SELECT count(*)::text FROM lonnymq.message_dequeue(60000, 1, 'target') $$);
-- (The view lists every channel, those without a row by a probe each, before
-- any filter on its name applies: one channel is read by the function.)
INSERT INTO costs SELECT 'channel_stats of one channel', * FROM pg_temp.lmq_cost(
    $$ SELECT s.ready || '/' || s.scheduled || '/' || s.locked || '/' || s.dead
       FROM lonnymq.channel_stats('target') AS s $$);
INSERT INTO costs SELECT 'history_prune, nothing old enough', * FROM pg_temp.lmq_cost(
    $$ SELECT lonnymq.history_prune(86400000)::text $$);
-- The ten ids are chosen before the call is measured: `make installcheck`
-- runs every file in one database, and 080 loads the same pathological
-- queue just before this file and removes it.  Until a vacuum removes
-- them, the index entries of its dead letters stand in dead_letter_channel_ix
-- under the same channel names, ahead of this file's (smaller ids), and a
-- choice by channel measured with the call read them or not as autovacuum
-- had come by or not.  The call itself reads by id, and no leftover has
-- these ids.
SELECT array_agg(d.id ORDER BY d.id) AS redrive_ids
FROM (SELECT d.id FROM lonnymq.dead_letter AS d WHERE d.channel = 'future5' ORDER BY d.id LIMIT 10) AS d \gset
INSERT INTO costs SELECT 'redrive 10 by id', * FROM pg_temp.lmq_cost(format(
    $$ SELECT lonnymq.dead_letter_redrive(NULL, %L::bigint[])::text $$, :'redrive_ids'));
-- Redriven messages are deliverable now: a dequeue of their channel
-- delivers them (after promoting what is due, when they are scheduled).
INSERT INTO costs SELECT 'dequeue: a redriven message', * FROM pg_temp.lmq_cost(
    $$ SELECT count(*)::text FROM lonnymq.message_dequeue(60000, 1, 'future5') $$);

SELECT is((SELECT result FROM costs WHERE what = 'create: new key'), 'true', 'a new key stores a message');
SELECT is((SELECT result FROM costs WHERE what = 'create: duplicate key'), 'true', 'a held key returns the holder''s id');
SELECT is((SELECT result FROM costs WHERE what = 'create batch of 100'), '100', 'a batch of 100 is created');
SELECT is((SELECT result FROM costs WHERE what = 'create batch of 100, keyed'), '100', 'a keyed batch of 100 is created');
SELECT is((SELECT result FROM costs WHERE what = 'create batch of 100, keyed, every key held'), '100',
    'the same keyed batch again returns 100 ids');
SELECT is((SELECT count(*) FROM lonnymq.message WHERE channel = 'keyed' AND key LIKE 'batch-%'), 100::bigint,
    'and stores nothing: the first batch''s messages hold the keys');
-- The channel's takes claim (max_concurrency without a release interval,
-- 0.15.0): its messages are placed at create (the warm-up's was delivered
-- and completed above), and the call that buries the poisoned lock, whose
-- claim it gives back, delivers 'good', claiming.  (Until 0.15.0 they
-- waited for their admission, in the order messages became due, behind
-- the 50,000 expired locks due here.)
SELECT is(
    (SELECT r.result || ' ' || s.ready || '/' || s.locked || '/' || c.num_admitted
     FROM costs AS r, lonnymq.channel_stats('poison') AS s, lonnymq.channel AS c
     WHERE r.what = 'dequeue: buries a poisoned lock' AND c.name = 'poison'),
    'good 0/1/1',
    'the poisoned lock goes to the dead letters and gives back its claim; the next message is delivered'
);
SELECT is((SELECT count(*) FROM lonnymq.dead_letter WHERE channel = 'poison' AND last_error = 'lock expired'), 1::bigint,
    'with "lock expired" as its last error');
SELECT is((SELECT result FROM costs WHERE what = 'complete batch of 100'), '100', 'a batch of 100 is completed');
SELECT is((SELECT result FROM costs WHERE what = 'fail: retry'), 'retry', 'a failure is retried');
SELECT is((SELECT result FROM costs WHERE what = 'fail: dead'), 'dead', 'a last failure is dead');
SELECT is((SELECT result FROM costs WHERE what = 'cancel'), 'true', 'a waiting message is cancelled');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: a schedule is due'), '1', 'a dequeue with a due schedule');
SELECT is((SELECT num_runs FROM lonnymq.schedule WHERE name = 'sched5000'), 1::bigint, 'promoted its occurrence');
SELECT is((SELECT result FROM costs WHERE what = 'channel_stats of one channel'), '0/0/1/0', 'channel_stats of one channel');
SELECT is((SELECT result FROM costs WHERE what = 'history_prune, nothing old enough'), '0', 'nothing is pruned');
SELECT is((SELECT result FROM costs WHERE what = 'redrive 10 by id'), '10', 'ten dead letters are redriven');
SELECT is((SELECT result FROM costs WHERE what = 'dequeue: a redriven message'), '1', 'and one is delivered at once');

SELECT is(
    (SELECT string_agg(what || ' seq=' || seq, ', ') FROM costs WHERE seq <> 0),
    NULL,
    'none of these calls scans a table sequentially'
);
SELECT is(
    (SELECT string_agg(what || ' idx=' || idx, ', ') FROM costs
     WHERE what NOT LIKE '%batch%' AND what NOT LIKE 'redrive%' AND what NOT LIKE 'dequeue%' AND idx > 40),
    NULL,
    'every other single-message call reads at most 40 index entries'
);
-- A dequeue promotes up to 8 due messages before it takes (50,000 expired
-- locks are due here): at most 60 entries, as in 080.
SELECT is(
    (SELECT string_agg(what || ' idx=' || idx, ', ') FROM costs WHERE what LIKE 'dequeue%' AND idx > 60),
    NULL,
    'every dequeue reads at most 60 index entries'
);
SELECT is(
    (SELECT string_agg(what || ' idx=' || idx, ', ') FROM costs WHERE what LIKE '%batch of 100%' AND idx > 500),
    NULL,
    'a batch of 100 reads at most 5 index entries per message, also when every key is held'
);
SELECT cmp_ok((SELECT idx FROM costs WHERE what = 'redrive 10 by id'), '<=', 50::bigint,
    'redriving 10 dead letters by id reads at most 5 index entries each');
SELECT cmp_ok((SELECT count(*) FROM lonnymq.message_key WHERE expires_at IS NOT NULL), '<', 50000::bigint,
    'keyed creates delete expired claims as they go');

SELECT diag(string_agg(format('%-40s seq=%s idx=%s', what, seq, idx), E'\n' ORDER BY what)) FROM costs;

SELECT * FROM finish();
SELECT pg_temp.lmq_committed_end();
