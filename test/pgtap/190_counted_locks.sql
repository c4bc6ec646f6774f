\ir include/setup.psql
-- 0.6.0: only the locks of channels with max_concurrency are counted
-- (message.is_counted) and indexed in message_locked_ix.  Every way of
-- taking a lock must say so, and channel_set giving a channel that limit must
-- count the locks it already holds: otherwise a saturated channel would not
-- see them (its counter "repaired" to 0, more delivered than the limit) nor
-- recover them when they expire.
SELECT plan(16);

CREATE FUNCTION pg_temp.locks(p_channel text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT count(*) FILTER (WHERE m.is_locked) || ' locked, '
        || count(*) FILTER (WHERE m.is_locked AND m.is_counted) || ' counted'
    FROM lonnymq.message AS m
    INNER JOIN lonnymq.channel AS c ON c.id = m.channel_id
    WHERE c.name = p_channel
$$;

-- Without max_concurrency: one new channel (its wake-up), then alone in the
-- rotation (the fast path, one message and a batch), then p_channel (the
-- general way).
SELECT lonnymq.message_create('a', convert_to('a' || g, 'UTF8')) FROM generate_series(1, 5) AS g;
SELECT is(
    ARRAY[pg_temp.lmq_take(), pg_temp.lmq_take()],
    ARRAY['a:a1', 'a:a2'],
    'a channel alone: one message at a time'
);
SELECT is(pg_temp.lmq_take_all(2), ARRAY['a:a3', 'a:a4'], 'a batch');
SELECT is(pg_temp.lmq_take(60000, 'a'), 'a:a5', 'by name');
SELECT is(pg_temp.locks('a'), '5 locked, 0 counted', 'locks in a channel without max_concurrency are not counted');

-- Several channels without limits, served one message at a time: from the
-- rotation, then (once they wait) from their wake-ups.
SELECT lonnymq.message_create(n, convert_to(n || '1', 'UTF8')) FROM unnest(ARRAY['b', 'c', 'd']) AS n;
SELECT is(
    ARRAY[pg_temp.lmq_take(), pg_temp.lmq_take(), pg_temp.lmq_take(), pg_temp.lmq_take()],
    ARRAY['b:b1', 'c:c1', 'd:d1', NULL],
    'three channels, in turn'
);
SELECT lonnymq.message_create(n, convert_to(n || '2', 'UTF8')) FROM unnest(ARRAY['b', 'c']) AS n;
SELECT is(
    ARRAY[pg_temp.lmq_take(), pg_temp.lmq_take()],
    ARRAY['b:b2', 'c:c2'],
    'woken again'
);
SELECT is(
    pg_temp.locks('b') || '; ' || pg_temp.locks('c') || '; ' || pg_temp.locks('d'),
    '2 locked, 0 counted; 2 locked, 0 counted; 1 locked, 0 counted',
    'nor are they, whichever way the lock was taken'
);

-- With max_concurrency: every lock is counted, whichever way it was taken.
SELECT lonnymq.channel_set(n, p_max_concurrency => 3) FROM unnest(ARRAY['l', 'm']) AS n;
SELECT lonnymq.message_create(n, convert_to(n || g, 'UTF8'))
FROM unnest(ARRAY['l', 'm']) AS n, generate_series(1, 4) AS g;
SELECT is(
    ARRAY[pg_temp.lmq_take(), pg_temp.lmq_take()],
    ARRAY['l:l1', 'm:m1'],
    'limited channels, in turn'
);
SELECT is(pg_temp.lmq_take(60000, 'l'), 'l:l2', 'by name');
SELECT is(
    (SELECT array_agg(t.x ORDER BY t.x) FROM unnest(pg_temp.lmq_take_all(10)) AS t (x)),
    ARRAY['l:l3', 'm:m2', 'm:m3'],
    'a batch, up to the limits'
);
SELECT is(
    pg_temp.locks('l') || '; ' || pg_temp.locks('m'),
    '3 locked, 3 counted; 3 locked, 3 counted',
    'every lock of a channel with max_concurrency is counted'
);

-- channel_set giving a channel max_concurrency counts the locks it holds.
SELECT lonnymq.message_create('g', convert_to('g' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT count(*) FROM lonnymq.message_dequeue(60000, 2, 'g');
SELECT lonnymq.channel_set('g', p_max_concurrency => 2);
SELECT is(
    pg_temp.locks('g') || ', num_locked ' || (SELECT c.num_locked FROM lonnymq.channel AS c WHERE c.name = 'g'),
    '2 locked, 2 counted, num_locked 2',
    'max_concurrency given to a channel holding two locks counts both'
);
SELECT is(
    ARRAY[pg_temp.lmq_take(60000, 'g'), pg_temp.lmq_take(60000, 'g')],
    ARRAY[NULL, NULL]::text[],
    'so the channel, at its limit, delivers nothing'
);
SELECT is((SELECT c.num_locked FROM lonnymq.channel AS c WHERE c.name = 'g'), 2, 'and keeps counting them');

-- A lock taken before the limit, expired: recovered first, as any lock of a
-- saturated channel.
SELECT lonnymq.message_create('h', 'h1'), lonnymq.message_create('h', 'h2');
SELECT is(pg_temp.lmq_take(1, 'h'), 'h:h1', 'a 1 ms lock, without a limit');
SELECT lonnymq.channel_set('h', p_max_concurrency => 1);
SELECT pg_sleep(0.01);
SELECT results_eq(
    $$ SELECT content, num_attempts, is_recovered FROM lonnymq.message_dequeue(60000, 5, 'h') $$,
    $$ VALUES ('h1'::bytea, 2, true) $$,
    'given max_concurrency 1, the channel delivers that expired lock again, not its next message'
);

SELECT * FROM finish();
ROLLBACK;
