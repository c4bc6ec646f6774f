\ir include/setup.psql
SELECT plan(16);

-- max_concurrency
SELECT lonnymq.channel_set('lim', p_max_concurrency => 2);
SELECT lonnymq.message_create('lim', convert_to('l' || g, 'UTF8')) FROM generate_series(1, 5) AS g;
SELECT lonnymq.message_create('free', convert_to('f' || g, 'UTF8')) FROM generate_series(1, 5) AS g;
CREATE TEMP TABLE got AS SELECT * FROM lonnymq.message_dequeue(60000, 10);
SELECT is((SELECT count(*) FROM got WHERE channel = 'lim'), 2::bigint, 'max_concurrency 2: a batch takes only 2 from the limited channel');
SELECT is((SELECT count(*) FROM got WHERE channel = 'free'), 5::bigint, 'while the unconstrained channel gives everything');
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(60000, 1, 'lim') $$, 'a saturated channel delivers nothing more');
SELECT ok(lonnymq.message_complete(g.id, g.num_attempts), 'completing one of its messages')
FROM (SELECT * FROM got WHERE channel = 'lim' ORDER BY id LIMIT 1) AS g;
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(60000, 10, 'lim')), 1::bigint, 'frees exactly one slot');
SELECT ok(lonnymq.message_defer(g.id, g.num_attempts, pg_temp.lmq_now() + 3600000), 'deferring a locked message')
FROM (SELECT * FROM got WHERE channel = 'lim' ORDER BY id LIMIT 1 OFFSET 1) AS g;
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(60000, 10, 'lim')), 1::bigint, 'frees a slot too');
-- 0.11.0: the count is admission's (channel.num_admitted, message.is_admitted,
-- which replace num_locked and is_counted): the two locked messages, and
-- nothing else of the channel (the deferred one gave its place back).
SELECT is(
    ARRAY[
        (SELECT num_admitted FROM lonnymq.channel WHERE name = 'lim')::bigint,
        (SELECT count(*) FROM lonnymq.message WHERE channel = 'lim' AND is_admitted),
        (SELECT count(*) FROM lonnymq.message WHERE channel = 'lim' AND is_admitted AND is_locked)
    ],
    ARRAY[2, 2, 2]::bigint[],
    'the channel counts 2 admitted messages, its 2 locked ones'
);

-- A saturated channel recovers its own expired locks.
SELECT lonnymq.channel_set('sat', p_max_concurrency => 1);
SELECT lonnymq.message_create('sat', 'first'), lonnymq.message_create('sat', 'second');
SELECT is(pg_temp.lmq_take(1, 'sat'), 'sat:first', 'saturate with a 1 ms lock');
SELECT pg_sleep(0.01);
SELECT results_eq(
    $$ SELECT content, num_attempts, is_recovered FROM lonnymq.message_dequeue(60000, 5, 'sat') $$,
    $$ VALUES ('first'::bytea, 2, true) $$,
    'a saturated channel delivers its expired lock again (not a new message)'
);

-- Raising and lowering the limit takes effect at once.
SELECT lonnymq.channel_set('sat', p_max_concurrency => 2);
SELECT is(pg_temp.lmq_take(60000, 'sat'), 'sat:second', 'raising max_concurrency lets the next message go');

-- release_interval_ms: minimum gap between deliveries.
SELECT lonnymq.channel_set('slow', p_release_interval_ms => 300);
SELECT lonnymq.message_create('slow', convert_to('s' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(60000, 10, 'slow')), 1::bigint, 'a rate-limited channel gives one message per interval');
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(60000, 10, 'slow') $$, 'and nothing before the interval has passed');
SELECT pg_sleep(0.32);
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(60000, 10, 'slow')), 1::bigint, 'then the next one');
SELECT is(
    (SELECT count(*) FROM lonnymq.message_dequeue(60000, 10)),
    0::bigint,
    'nothing else is ready anywhere'
);

-- An admission under a clock read before another backend's (a completion
-- that read its clock, then admitted the message another backend's
-- promotion, with a later clock, found due and held): the interval's end
-- is the message's dequeue_at only when that is later.  (The soak test
-- once saw a release-interval message delivered 4 ms before its
-- dequeue_at.)
SELECT lonnymq.channel_set('lc', p_release_interval_ms => 1000);
SELECT pg_temp.lmq_now() + 60000 AS lc_at \gset
UPDATE lonnymq.channel SET release_at = :lc_at - 50 WHERE name = 'lc';
INSERT INTO lonnymq.message (channel_id, channel, dequeue_at, created_at, content, is_held)
VALUES (lonnymq._channel_id('lc'), 'lc', :lc_at, :lc_at, 'x', TRUE);
SELECT lonnymq._channel_admit(lonnymq._channel_id('lc'), 0, 0, :lc_at - 100, NULL);
SELECT is(
    (SELECT m.dequeue_at - :lc_at || ' ' || m.is_admitted FROM lonnymq.message AS m WHERE m.channel = 'lc'),
    '0 true',
    'an admission never moves a message before its own dequeue_at'
);

SELECT * FROM finish();
ROLLBACK;
