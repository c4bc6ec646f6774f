\ir include/setup.psql
-- message_create_batch and message_complete_batch.
SELECT plan(49);

-- Dequeue up to p_limit from one channel; contents in delivery order.
CREATE FUNCTION pg_temp.take_from(p_channel text, p_limit integer DEFAULT 100, p_lock_ms bigint DEFAULT 60000)
RETURNS text
LANGUAGE sql
AS $$
    SELECT string_agg(convert_from(d.content, 'UTF8'), ',' ORDER BY d.ord)
    FROM lonnymq.message_dequeue(p_lock_ms, p_limit, p_channel)
        WITH ORDINALITY AS d (id, channel, content, state, num_attempts, dequeue_at, is_recovered, ord)
$$;

-- Messages of a channel, "content" in id order.
CREATE FUNCTION pg_temp.held(p_channel text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT string_agg(convert_from(m.content, 'UTF8'), ',' ORDER BY m.id)
    FROM lonnymq.message AS m
    WHERE m.channel = p_channel
$$;

-- ---------------------------------------------------------------- wake-ups
-- (first, while nothing else is ready: these use dequeue without p_channel)

-- An idle channel (emptied by a consumer) gets a batch.
SELECT lonnymq.message_create('idle', 'first');
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'idle') AS d;
SELECT is(pg_temp.lmq_take(), NULL, 'the idle channel has nothing');
SELECT is(pg_temp.lmq_take(60000, 'idle'), NULL, 'nor by name');
SELECT lonnymq.message_create_batch('idle', ARRAY['i1', 'i2']::bytea[]);
SELECT is(pg_temp.lmq_take_all(10), ARRAY['idle:i1', 'idle:i2'],
    'a batch wakes an idle channel: a consumer of any channel gets it, in input order');

-- A waiting channel (nothing before a future message) gets a batch whose
-- second element is due now.
SELECT lonnymq.message_create('wait', 'w0');
SELECT lonnymq.message_create('wait', 'w-hour', pg_temp.lmq_now() + 3600000) AS hour_id \gset
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'wait') AS d;
SELECT is(pg_temp.lmq_take(60000, 'wait'), NULL, 'the waiting channel has nothing due');
SELECT is(pg_temp.lmq_take(), NULL, 'nor without p_channel: its future message waits');
SELECT lonnymq.message_create_batch(
    'wait', ARRAY['w-later', 'w-now']::bytea[], ARRAY[pg_temp.lmq_now() + 3600000, NULL]
);
SELECT is(pg_temp.lmq_take_all(10), ARRAY['wait:w-now'],
    'a batch wakes a waiting channel at its earliest element; the future ones wait');

-- ---------------------------------------------------------------- ids and order
CREATE TEMP TABLE b1 AS
SELECT t.id, t.ord
FROM lonnymq.message_create_batch('b', ARRAY['m1', 'm2', 'm3', 'm4']::bytea[]) WITH ORDINALITY AS t (id, ord);
SELECT is((SELECT count(id) FROM b1), 4::bigint, 'one id per input');
SELECT is((SELECT count(DISTINCT id) FROM b1), 4::bigint, 'distinct ids');
SELECT is((SELECT array_agg(id ORDER BY ord) FROM b1), (SELECT array_agg(id ORDER BY id) FROM b1),
    'ids ascend in input order');
SELECT is(
    (SELECT string_agg(convert_from(m.content, 'UTF8'), ',' ORDER BY b1.ord) FROM b1 INNER JOIN lonnymq.message AS m ON m.id = b1.id),
    'm1,m2,m3,m4',
    'the k-th id is the message of the k-th input'
);
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.id IN (SELECT id FROM b1) AND m.dequeue_at = lonnymq.to_epoch(now())),
    4::bigint,
    'NULL p_dequeue_at: every message is due at the transaction start'
);
SELECT is(pg_temp.take_from('b'), 'm1,m2,m3,m4', 'a batch is delivered in input order');

-- Per-element dequeue_at; NULL elements are the transaction start.
SELECT pg_temp.lmq_now() + 3600000 AS late_at \gset
CREATE TEMP TABLE b2 AS
SELECT t.id, t.ord
FROM lonnymq.message_create_batch(
    'p', ARRAY['late', 'now1', 'urgent', 'now2']::bytea[], ARRAY[:late_at, NULL, -5, NULL]
) WITH ORDINALITY AS t (id, ord);
SELECT is(
    (SELECT array_agg(m.dequeue_at ORDER BY b2.ord) FROM b2 INNER JOIN lonnymq.message AS m ON m.id = b2.id),
    ARRAY[:late_at, lonnymq.to_epoch(now()), -5, lonnymq.to_epoch(now())],
    'each message gets its own dequeue_at (NULL element: the transaction start)'
);
SELECT is(pg_temp.take_from('p'), 'urgent,now1,now2', 'delivered by dequeue_at, the future one withheld');

-- The same dequeue_at in one batch: input order even with many messages.
SELECT count(*) FROM lonnymq.message_create_batch(
    'many', (SELECT array_agg(convert_to(lpad(g::text, 4, '0'), 'UTF8') ORDER BY g) FROM generate_series(1, 300) AS g)
);
SELECT is(pg_temp.take_from('many', 1000),
    (SELECT string_agg(lpad(g::text, 4, '0'), ',' ORDER BY g) FROM generate_series(1, 300) AS g),
    '300 messages of one batch come out in input order');

-- ---------------------------------------------------------------- keys
SELECT lonnymq.message_create('k', 'old', NULL, 'k1') AS k1_id \gset
CREATE TEMP TABLE bk AS
SELECT t.id, t.ord
FROM lonnymq.message_create_batch(
    'k', ARRAY['a', 'b', 'c', 'd', 'e']::bytea[], NULL, ARRAY['k1', 'k2', 'k2', NULL, 'k3']
) WITH ORDINALITY AS t (id, ord);
SELECT is((SELECT id FROM bk WHERE ord = 1), :k1_id::bigint, 'a key held by an existing message gives its id');
SELECT is((SELECT id FROM bk WHERE ord = 3), (SELECT id FROM bk WHERE ord = 2),
    'a key repeated inside the batch gives the first occurrence''s id');
SELECT ok(
    (SELECT id FROM bk WHERE ord = 2) > :k1_id
    AND (SELECT id FROM bk WHERE ord = 4) > (SELECT id FROM bk WHERE ord = 2)
    AND (SELECT id FROM bk WHERE ord = 5) > (SELECT id FROM bk WHERE ord = 4),
    'the stored ones get new ascending ids'
);
SELECT is(pg_temp.held('k'), 'old,b,d,e', 'duplicates stored nothing');
SELECT is(
    (SELECT string_agg(k.key || '=' || (k.message_id = b.id), ',' ORDER BY k.key)
     FROM lonnymq.message_key AS k
     INNER JOIN bk AS b ON b.ord = CASE k.key WHEN 'k1' THEN 1 WHEN 'k2' THEN 2 WHEN 'k3' THEN 5 END),
    'k1=true,k2=true,k3=true',
    'each key is claimed by the message that holds it'
);
SELECT is(
    (SELECT string_agg(coalesce(m.key, '-'), ',' ORDER BY m.id) FROM lonnymq.message AS m WHERE m.id IN (SELECT id FROM bk)),
    'k1,k2,-,k3',
    'the stored messages carry their keys'
);

-- ---------------------------------------------------------------- max_size
SELECT lonnymq.channel_set('s', p_max_size => 3);
SELECT lonnymq.message_create('s', 'held');
CREATE TEMP TABLE bs AS
SELECT t.id, t.ord
FROM lonnymq.message_create_batch(
    's', ARRAY['s1', 's2', 's3', 's4', 's5', 's6']::bytea[], NULL, ARRAY[NULL, 'x', 'y', 'x', 'y', NULL]
) WITH ORDINALITY AS t (id, ord);
SELECT is(
    (SELECT string_agg(CASE WHEN id IS NULL THEN 'NULL' ELSE 'id' END, ',' ORDER BY ord) FROM bs),
    'id,id,NULL,id,NULL,NULL',
    'max_size 3 holding 1: the first two are kept, the rest NULL (a repeated kept key still gives its id)'
);
SELECT is((SELECT id FROM bs WHERE ord = 4), (SELECT id FROM bs WHERE ord = 2), 'the repeat of a kept key gives the kept id');
SELECT is(pg_temp.held('s'), 'held,s1,s2', 'only the kept ones are stored');
SELECT is(
    (SELECT q.num_created - c.num_removed FROM lonnymq.channel_quota AS q INNER JOIN lonnymq.channel AS c ON c.id = q.channel_id WHERE c.name = 's'),
    3::bigint,
    'the quota counts exactly the messages held'
);
SELECT is(
    (SELECT count(*) FROM lonnymq.message_key AS k INNER JOIN lonnymq.channel AS c ON c.id = k.channel_id WHERE c.name = 's' AND k.key = 'y'),
    0::bigint,
    'the dropped message''s key is not claimed'
);
SELECT is(lonnymq.message_create('s', 'over'), NULL, 'the channel is full');
SELECT is(
    (SELECT count(t.id) FROM lonnymq.message_create_batch('s', ARRAY['f1', 'f2']::bytea[]) AS t (id)),
    0::bigint,
    'a batch on a full channel: every id NULL'
);
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 's') AS d;
SELECT isnt(lonnymq.message_create('s', 'y-again', NULL, 'y'), NULL, 'after a complete the key of the dropped message is free');
SELECT is(pg_temp.held('s'), 's1,s2,y-again', 'and the quota let exactly one more in');

-- An empty batch.
SELECT is_empty($$ SELECT * FROM lonnymq.message_create_batch('empty', '{}'::bytea[]) $$, 'an empty array returns no rows');
SELECT is(pg_temp.held('empty'), NULL, 'and stores nothing');

-- ---------------------------------------------------------------- complete_batch
SELECT lonnymq.channel_set('cc', p_max_concurrency => 2);
SELECT lonnymq.channel_set('cs', p_max_size => 2);
SELECT lonnymq.channel_set('ch', p_retain_history => TRUE, p_dedup_window_ms => 3600000);
SELECT lonnymq.message_create_batch('cc', ARRAY['c1', 'c2', 'c3']::bytea[]);
SELECT lonnymq.message_create_batch('cs', ARRAY['s1', 's2']::bytea[]);
SELECT lonnymq.message_create_batch('ch', ARRAY['h1', 'h2']::bytea[], NULL, ARRAY['hk', NULL]);
SELECT lonnymq.message_create_batch('cf', ARRAY['f1', 'f2']::bytea[], NULL, ARRAY['fk', NULL]);
CREATE TEMP TABLE got AS
SELECT * FROM lonnymq.message_dequeue(60000, 10, 'cc')
UNION ALL SELECT * FROM lonnymq.message_dequeue(60000, 10, 'cs')
UNION ALL SELECT * FROM lonnymq.message_dequeue(60000, 10, 'ch')
UNION ALL SELECT * FROM lonnymq.message_dequeue(60000, 1, 'cf');
SELECT is(
    (SELECT string_agg(convert_from(content, 'UTF8'), ',' ORDER BY id) FROM got),
    'c1,c2,s1,s2,h1,h2,f1',
    'locked: two of the max_concurrency channel, the others'
);
SELECT is(pg_temp.take_from('cc'), NULL, 'the max_concurrency channel is saturated');
SELECT id AS h2_id, num_attempts AS h2_tok FROM got WHERE content = 'h2' \gset
SELECT m.id AS f2_id FROM lonnymq.message AS m WHERE m.content = 'f2' \gset
CREATE TEMP TABLE untouched AS
SELECT m.id, m::text AS r FROM lonnymq.message AS m WHERE m.id IN (:h2_id, :f2_id);

SELECT is(
    lonnymq.message_complete_batch(
        (SELECT array_agg(id ORDER BY id) FROM got WHERE content <> 'h2') || ARRAY[:h2_id, :f2_id, 9223372036854775807],
        (SELECT array_agg(num_attempts ORDER BY id) FROM got WHERE content <> 'h2') || ARRAY[:h2_tok + 1, 0, 1]
    ),
    6,
    'complete_batch returns how many it completed (stale token, unlocked and unknown ids skipped)'
);
SELECT is(
    (SELECT string_agg(convert_from(m.content, 'UTF8'), ',' ORDER BY m.id)
     FROM lonnymq.message AS m
     WHERE m.channel IN ('cc', 'cs', 'ch', 'cf')),
    'c3,h2,f2',
    'the completed messages are gone, the skipped ones are not'
);
SELECT is(
    (SELECT string_agg(u.r, ',' ORDER BY u.id) FROM untouched AS u),
    (SELECT string_agg(m::text, ',' ORDER BY m.id) FROM lonnymq.message AS m WHERE m.id IN (:h2_id, :f2_id)),
    'the skipped messages are unchanged'
);
-- 0.15.0: the channel's takes claim (num_admitted counts its locks): the two
-- completes gave both claims back, and the held c3 went back to the round
-- order at once, unclaimed (placed, not admitted: its take claims).
SELECT is(
    (SELECT c.num_admitted || ':'
        || coalesce(string_agg(convert_from(m.content, 'UTF8'), ',' ORDER BY m.id)
            FILTER (WHERE m.position IS NOT NULL AND NOT m.is_admitted), '-')
        || ':' || count(*) FILTER (WHERE m.is_locked)
     FROM lonnymq.channel AS c LEFT JOIN lonnymq.message AS m ON m.channel = c.name
     WHERE c.name = 'cc' GROUP BY c.num_admitted),
    '0:c3:0',
    'max_concurrency: no lock counted any more, the held message back in the round order'
);
SELECT is(pg_temp.take_from('cc'), 'c3', 'the saturated channel rejoins the rotation at once');
SELECT is((SELECT num_removed FROM lonnymq.channel WHERE name = 'cs'), 2::bigint, 'max_size: both removals counted');
SELECT is(
    ARRAY[lonnymq.message_create('cs', 'n1') IS NULL, lonnymq.message_create('cs', 'n2') IS NULL, lonnymq.message_create('cs', 'n3') IS NULL],
    ARRAY[FALSE, FALSE, TRUE],
    'the max_size channel has room for exactly 2 again'
);
SELECT is(
    (SELECT string_agg(h.id || ':' || convert_from(h.content, 'UTF8') || ':' || coalesce(h.key, '-') || ':' || h.num_attempts, ',' ORDER BY h.id)
     FROM lonnymq.message_history AS h),
    (SELECT string_agg(g.id || ':h1:hk:1', ',') FROM got AS g WHERE g.content = 'h1'),
    'history: only the completed message of the retaining channel, with content, key and attempts'
);
SELECT ok(
    (SELECT completed_at BETWEEN lonnymq.to_epoch(now()) AND pg_temp.lmq_now() FROM lonnymq.message_history),
    'history: completed_at is the time of the complete'
);
SELECT is(
    lonnymq.message_create('ch', 'h1-again', NULL, 'hk'),
    (SELECT id FROM got WHERE content = 'h1'),
    'a completed message''s key stays held for the dedup window'
);
SELECT ok(
    lonnymq.message_create('cf', 'f1-again', NULL, 'fk') > (SELECT id FROM got WHERE content = 'f1'),
    'without a window the key is free at once'
);
SELECT is(
    lonnymq.message_complete_batch(
        (SELECT array_agg(id) FROM got WHERE content <> 'h2'), (SELECT array_agg(num_attempts) FROM got WHERE content <> 'h2')
    ),
    0,
    'completing the same batch again completes nothing'
);
SELECT is(lonnymq.message_complete_batch('{}', '{}'), 0, 'an empty batch completes nothing');

-- Behind a priority message (early, at the channel's back), a batch message
-- that sorts before the channel's last message that is not early is early
-- too, as message_create's is: the channel delivers in (dequeue_at, id)
-- order, one turn at a time.
SELECT lonnymq.message_create('eb', 'n', 1000000);
SELECT lonnymq.message_create('eb', 'e', 10);
SELECT lonnymq.message_create_batch('eb', ARRAY['x'::bytea], ARRAY[500000::bigint]);
SELECT ok((SELECT m.is_early FROM lonnymq.message AS m WHERE m.channel = 'eb' AND m.content = 'x'),
    'a batch message behind an early one that sorts before the last non-early one is early');
SELECT is(
    concat_ws(',', pg_temp.take_from('eb', 1), pg_temp.take_from('eb', 1), pg_temp.take_from('eb', 1)),
    'e,x,n',
    'one turn at a time, the channel delivers in (dequeue_at, id) order'
);

SELECT * FROM finish();
ROLLBACK;
