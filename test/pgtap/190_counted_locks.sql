\ir include/setup.psql
-- max_concurrency is exact through admission (0.11.0; 0.6.0 to 0.10.1
-- counted locks in message.is_counted).  A channel with max_concurrency k
-- admits at most k of its messages (ready or locked: message.is_admitted,
-- counted in channel.num_admitted) and holds the others (is_held), so the
-- take never sees a message its channel may not deliver.  An expired lock
-- stays admitted: a saturated channel re-delivers only its own expired
-- locks.  A complete, a fail, a defer or a cancel of an admitted message
-- admits the next held one.  channel_set giving a channel the limit counts
-- the locks it already holds.  Channels without a limit admit nothing and
-- have no row.
SELECT plan(24);

-- "<locked> locked, <admitted> admitted, <held> held, num_admitted <n>".
CREATE FUNCTION pg_temp.adm(p_channel text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT count(*) FILTER (WHERE m.is_locked) || ' locked, '
        || count(*) FILTER (WHERE m.is_admitted) || ' admitted, '
        || count(*) FILTER (WHERE m.is_held) || ' held, num_admitted '
        || coalesce((SELECT c.num_admitted::text FROM lonnymq.channel AS c WHERE c.name = p_channel), 'none')
    FROM lonnymq.message AS m
    WHERE m.channel = p_channel
$$;

-- ---------------------------------------------------------------- without a limit
SELECT lonnymq.message_create('a', convert_to('a' || g, 'UTF8')) FROM generate_series(1, 5) AS g;
SELECT is(
    ARRAY[pg_temp.lmq_take(), pg_temp.lmq_take()],
    ARRAY['a:a1', 'a:a2'],
    'a channel without a limit: one message at a time'
);
SELECT is(pg_temp.lmq_take_all(2), ARRAY['a:a3', 'a:a4'], 'a batch');
SELECT is(pg_temp.lmq_take(60000, 'a'), 'a:a5', 'by name');
SELECT is(pg_temp.adm('a'), '5 locked, 0 admitted, 0 held, num_admitted none',
    'its locks are not admitted, and it has no row to count them');

-- ---------------------------------------------------------------- admission
-- A producer leaves a limited channel's message due at once; the next
-- dequeue (or tick()) admits it: tick() settles before the counts are read.
SELECT lonnymq.channel_set(n, p_max_concurrency => 3) FROM unnest(ARRAY['l', 'm']) AS n;
SELECT lonnymq.message_create('l', convert_to('l' || g, 'UTF8')) FROM generate_series(1, 4) AS g;
SELECT lonnymq.message_create('m', convert_to('m' || g, 'UTF8')) FROM generate_series(1, 4) AS g;
SELECT lonnymq.tick();
SELECT is(pg_temp.adm('l'), '0 locked, 3 admitted, 1 held, num_admitted 3',
    'max_concurrency 3: three of four messages admitted, the fourth held');
SELECT is(
    ARRAY[pg_temp.lmq_take(), pg_temp.lmq_take()],
    ARRAY['l:l1', 'm:m1'],
    'limited channels, in turn'
);
SELECT is(pg_temp.lmq_take(60000, 'l'), 'l:l2', 'by name');
SELECT is(
    (SELECT array_agg(t.x ORDER BY t.x) FROM unnest(pg_temp.lmq_take_all(10)) AS t (x)),
    ARRAY['l:l3', 'm:m2', 'm:m3'],
    'a batch of 10, up to the limits'
);
SELECT is(pg_temp.adm('l') || '; ' || pg_temp.adm('m'),
    '3 locked, 3 admitted, 1 held, num_admitted 3; 3 locked, 3 admitted, 1 held, num_admitted 3',
    'every lock of a channel with max_concurrency is admitted and counted'
);
SELECT is(
    ARRAY[pg_temp.lmq_take(60000, 'l'), pg_temp.lmq_take(60000, 'm'), pg_temp.lmq_take()],
    ARRAY[NULL, NULL, NULL]::text[],
    'at their limits, neither delivers its held message, by name or not'
);

-- A complete frees a place: the next held message is admitted and
-- delivered, and the count stays exact.
SELECT m.id AS l1, m.num_attempts AS l1tok FROM lonnymq.message AS m WHERE m.channel = 'l' AND m.content = 'l1' \gset
SELECT is(lonnymq.message_complete(:l1, :l1tok), TRUE, 'l1 completed');
SELECT is(pg_temp.adm('l'), '2 locked, 3 admitted, 0 held, num_admitted 3', 'which admitted l4');
SELECT is(pg_temp.lmq_take_all(10), ARRAY['l:l4'], 'l4 is delivered, nothing more');

-- A fail, a defer and a cancel of an admitted message free its place too.
SELECT lonnymq.message_create('m', 'm5');
SELECT lonnymq.tick();
SELECT m.id AS m1, m.num_attempts AS m1tok FROM lonnymq.message AS m WHERE m.channel = 'm' AND m.content = 'm1' \gset
SELECT m.id AS m2, m.num_attempts AS m2tok FROM lonnymq.message AS m WHERE m.channel = 'm' AND m.content = 'm2' \gset
SELECT is(lonnymq.message_fail(:m1, :m1tok, 'boom'), 'retry', 'm1 fails (retried after its backoff)');
SELECT is(pg_temp.adm('m'), '2 locked, 3 admitted, 1 held, num_admitted 3',
    'its place went to m4 (admitted, ready), m5 still held, m1 scheduled');
SELECT is(lonnymq.message_defer(:m2, :m2tok, pg_temp.lmq_now() + 3600000), TRUE, 'm2 deferred by an hour');
SELECT is(
    (SELECT string_agg(convert_from(m.content, 'UTF8'), ',' ORDER BY m.id) FROM lonnymq.message AS m
     WHERE m.channel = 'm' AND m.is_admitted AND NOT m.is_locked),
    'm4,m5',
    'its place went to m5'
);
SELECT m.id AS m4 FROM lonnymq.message AS m WHERE m.channel = 'm' AND m.content = 'm4' \gset
SELECT lonnymq.message_create('m', 'm6');
SELECT lonnymq.tick();
SELECT is(lonnymq.message_cancel(:m4), TRUE, 'm4, admitted and not delivered, cancelled');
SELECT is(
    (SELECT string_agg(convert_from(m.content, 'UTF8'), ',' ORDER BY m.id) || ' ' || pg_temp.adm('m')
     FROM lonnymq.message AS m WHERE m.channel = 'm' AND m.is_admitted AND NOT m.is_locked),
    'm5,m6 1 locked, 3 admitted, 0 held, num_admitted 3',
    'its place went to m6'
);

-- ---------------------------------------------------------------- a limit given to a channel holding locks
SELECT lonnymq.message_create('g', convert_to('g' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT count(*) FROM lonnymq.message_dequeue(60000, 2, 'g');
SELECT lonnymq.channel_set('g', p_max_concurrency => 2);
SELECT is(pg_temp.adm('g'), '2 locked, 2 admitted, 1 held, num_admitted 2',
    'max_concurrency 2 given to a channel holding two locks counts both, and holds its third message');
SELECT is(
    ARRAY[pg_temp.lmq_take(60000, 'g'), pg_temp.lmq_take(60000, 'g')],
    ARRAY[NULL, NULL]::text[],
    'so the channel, at its limit, delivers nothing'
);

-- ---------------------------------------------------------------- expired locks stay admitted
-- A lock taken before the limit, expired: the saturated channel delivers
-- that expired lock again, never its next message.
SELECT lonnymq.message_create('h', 'h1'), lonnymq.message_create('h', 'h2');
SELECT is(pg_temp.lmq_take(1, 'h'), 'h:h1', 'a 1 ms lock, without a limit');
SELECT lonnymq.channel_set('h', p_max_concurrency => 1);
SELECT pg_sleep(0.01);
SELECT results_eq(
    $$ SELECT content, num_attempts, is_recovered FROM lonnymq.message_dequeue(60000, 5, 'h') $$,
    $$ VALUES ('h1'::bytea, 2, true) $$,
    'given max_concurrency 1, the channel delivers that expired lock again, not its next message'
);
SELECT is(pg_temp.adm('h'), '1 locked, 1 admitted, 1 held, num_admitted 1', 'and stays at its limit');

SELECT * FROM finish();
ROLLBACK;
