\ir include/setup.psql
-- max_concurrency is exact: it counts locks (0.15.0; admission counted
-- ready and locked messages from 0.11.0, and 0.6.0 to 0.10.1 counted locks
-- in message.is_counted).  A channel with max_concurrency k and no release
-- interval, pause or order claims at the take: its messages are placed like
-- any channel's (message.is_limited), and a take claims a unit of
-- channel.num_admitted for each message it delivers (message.is_admitted
-- while locked), at most k; a turn of a full channel is held by the take
-- (is_held), as is a create into a full channel.  An expired lock keeps
-- its claim: a saturated channel re-delivers only its own expired locks.
-- A complete, a fail, a defer or a cancel of a claimed message gives its
-- claim back and puts held messages back in the round order, unclaimed, up
-- to the room neither the locks nor the placed unclaimed messages take up.
-- channel_set giving a channel the limit counts the locks it already holds.
-- Channels without a limit claim nothing and have no row.
SELECT plan(24);

-- "<locked> locked, <admitted> admitted, <placed> placed, <held> held,
-- num_admitted <n>" (placed: unclaimed, in the round order).
CREATE FUNCTION pg_temp.adm(p_channel text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT count(*) FILTER (WHERE m.is_locked) || ' locked, '
        || count(*) FILTER (WHERE m.is_admitted) || ' admitted, '
        || count(*) FILTER (WHERE m.position IS NOT NULL AND NOT m.is_admitted) || ' placed, '
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
SELECT is(pg_temp.adm('a'), '5 locked, 0 admitted, 0 placed, 0 held, num_admitted none',
    'its locks are not admitted, and it has no row to count them');

-- ---------------------------------------------------------------- claims
-- A producer places a message of a channel whose takes claim, unclaimed
-- (tick() changes nothing: nothing is due).
SELECT lonnymq.channel_set(n, p_max_concurrency => 3) FROM unnest(ARRAY['l', 'm']) AS n;
SELECT lonnymq.message_create('l', convert_to('l' || g, 'UTF8')) FROM generate_series(1, 4) AS g;
SELECT lonnymq.message_create('m', convert_to('m' || g, 'UTF8')) FROM generate_series(1, 4) AS g;
SELECT lonnymq.tick();
SELECT is(pg_temp.adm('l'), '0 locked, 0 admitted, 4 placed, 0 held, num_admitted 0',
    'max_concurrency 3: its four messages placed, none claimed');
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
    '3 locked, 3 admitted, 0 placed, 1 held, num_admitted 3; 3 locked, 3 admitted, 0 placed, 1 held, num_admitted 3',
    'every lock of a channel with max_concurrency holds a claim, counted; the turn of a full channel was held'
);
SELECT is(
    ARRAY[pg_temp.lmq_take(60000, 'l'), pg_temp.lmq_take(60000, 'm'), pg_temp.lmq_take()],
    ARRAY[NULL, NULL, NULL]::text[],
    'at their limits, neither delivers its held message, by name or not'
);

-- A complete gives its claim back: the next held message is placed, and
-- delivered, claiming, and the count stays exact.
SELECT m.id AS l1, m.num_attempts AS l1tok FROM lonnymq.message AS m WHERE m.channel = 'l' AND m.content = 'l1' \gset
SELECT is(lonnymq.message_complete(:l1, :l1tok), TRUE, 'l1 completed');
SELECT is(pg_temp.adm('l'), '2 locked, 2 admitted, 1 placed, 0 held, num_admitted 2', 'which placed l4');
SELECT is(pg_temp.lmq_take_all(10), ARRAY['l:l4'], 'l4 is delivered, nothing more');

-- A fail and a defer of a claimed message give its claim back too; a cancel
-- of a placed one gives its share of the room to a held one.
SELECT lonnymq.message_create('m', 'm5');
SELECT lonnymq.tick();
SELECT m.id AS m1, m.num_attempts AS m1tok FROM lonnymq.message AS m WHERE m.channel = 'm' AND m.content = 'm1' \gset
SELECT m.id AS m2, m.num_attempts AS m2tok FROM lonnymq.message AS m WHERE m.channel = 'm' AND m.content = 'm2' \gset
SELECT is(lonnymq.message_fail(:m1, :m1tok, 'boom'), 'retry', 'm1 fails (retried after its backoff)');
SELECT is(pg_temp.adm('m'), '2 locked, 2 admitted, 1 placed, 1 held, num_admitted 2',
    'its claim went back: m4 placed, m5 (held at create) still held, m1 scheduled');
SELECT is(lonnymq.message_defer(:m2, :m2tok, pg_temp.lmq_now() + 3600000), TRUE, 'm2 deferred by an hour');
SELECT is(
    (SELECT string_agg(convert_from(m.content, 'UTF8'), ',' ORDER BY m.id) FROM lonnymq.message AS m
     WHERE m.channel = 'm' AND m.position IS NOT NULL AND NOT m.is_admitted),
    'm4,m5',
    'its claim went back: m5 placed too'
);
SELECT m.id AS m4 FROM lonnymq.message AS m WHERE m.channel = 'm' AND m.content = 'm4' \gset
SELECT lonnymq.message_create('m', 'm6');
SELECT lonnymq.tick();
SELECT is(lonnymq.message_cancel(:m4), TRUE, 'm4, placed and not delivered, cancelled');
SELECT is(
    (SELECT string_agg(convert_from(m.content, 'UTF8'), ',' ORDER BY m.id) || ' ' || pg_temp.adm('m')
     FROM lonnymq.message AS m WHERE m.channel = 'm' AND m.position IS NOT NULL AND NOT m.is_admitted),
    'm5,m6 1 locked, 1 admitted, 2 placed, 0 held, num_admitted 1',
    'm6 was placed at create (the channel had room): m5 and m6 placed, one lock claims'
);

-- ---------------------------------------------------------------- a limit given to a channel holding locks
SELECT lonnymq.message_create('g', convert_to('g' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT count(*) FROM lonnymq.message_dequeue(60000, 2, 'g');
SELECT lonnymq.channel_set('g', p_max_concurrency => 2);
SELECT is(pg_temp.adm('g'), '2 locked, 2 admitted, 0 placed, 1 held, num_admitted 2',
    'max_concurrency 2 given to a channel holding two locks counts both, and holds its third message');
SELECT is(
    ARRAY[pg_temp.lmq_take(60000, 'g'), pg_temp.lmq_take(60000, 'g')],
    ARRAY[NULL, NULL]::text[],
    'so the channel, at its limit, delivers nothing'
);

-- ---------------------------------------------------------------- expired locks keep their claims
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
SELECT is(pg_temp.adm('h'), '1 locked, 1 admitted, 0 placed, 1 held, num_admitted 1', 'and stays at its limit');

SELECT * FROM finish();
ROLLBACK;
