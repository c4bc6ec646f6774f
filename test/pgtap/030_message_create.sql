\ir include/setup.psql
SELECT plan(12);

SELECT ok(lonnymq.message_create('a', 'one') IS NOT NULL, 'message_create returns an id');
-- 0.11.0: a channel without configuration has no row in lonnymq.channel; it
-- exists (channel_stats) while it holds messages, and its messages carry its
-- name and its id, the hash of the name.
SELECT is(
    ARRAY[
        (SELECT count(*) FROM lonnymq.channel_stats WHERE channel = 'a'),
        (SELECT count(*) FROM lonnymq.channel WHERE name = 'a'),
        (SELECT count(*) FROM lonnymq.message WHERE channel = 'a' AND channel_id = hashtextextended('a', 0))
    ],
    ARRAY[1, 0, 1]::bigint[],
    'an unknown channel exists while it holds messages, without a channel row'
);
SELECT results_eq(
    $$ SELECT max_concurrency, max_size, release_interval_ms, is_paused FROM lonnymq.channel_stats WHERE channel = 'a' $$,
    $$ VALUES (NULL::integer, NULL::integer, 0::bigint, FALSE) $$,
    'with no limits'
);
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'a') AS d;
SELECT is(
    (SELECT count(*) FROM lonnymq.channel_stats WHERE channel = 'a')
        + (SELECT count(*) FROM lonnymq.channel WHERE name = 'a'),
    0::bigint,
    'once drained, a channel without configuration leaves nothing behind'
);

-- Ids increase within a transaction and the default dequeue_at is the
-- transaction start, so order within a transaction is creation order.
SELECT lonnymq.message_create('fifo', convert_to('m' || g, 'UTF8')) FROM generate_series(1, 20) AS g;
SELECT is(
    (SELECT count(DISTINCT dequeue_at) FROM lonnymq.message AS m WHERE m.channel = 'fifo'),
    1::bigint,
    'messages of one transaction share the default dequeue_at (now())'
);
SELECT is(
    (SELECT array_agg(convert_from(d.content, 'UTF8') ORDER BY ord)
     FROM lonnymq.message_dequeue(60000, 20, 'fifo') WITH ORDINALITY AS d(id, channel, content, state, num_attempts, dequeue_at, is_recovered, ord)),
    (SELECT array_agg('m' || g ORDER BY g) FROM generate_series(1, 20) AS g),
    'they are delivered in creation order'
);

SELECT lonnymq.message_create('sched', 'later', 4102444800000) AS later_id \gset
SELECT is((SELECT dequeue_at FROM lonnymq.message WHERE id = :later_id), 4102444800000::bigint,
    'an explicit dequeue_at is stored as given');
SELECT lonnymq.message_create('sched', 'urgent', (-9223372036854775807 - 1)) AS urgent_id \gset
SELECT is((SELECT dequeue_at FROM lonnymq.message WHERE id = :urgent_id), (-9223372036854775807 - 1)::bigint,
    'the most negative dequeue_at is accepted');
SELECT lonnymq.message_create('sched', 'never', 9223372036854775807) AS never_id \gset
SELECT is((SELECT dequeue_at FROM lonnymq.message WHERE id = :never_id), 9223372036854775807,
    'the largest dequeue_at is accepted (never delivered)');
SELECT lonnymq.message_create('bin', '\x00ff00'::bytea) AS bin_id \gset
SELECT is((SELECT content FROM lonnymq.message WHERE id = :bin_id), '\x00ff00'::bytea, 'binary content round-trips');
SELECT ok(lonnymq.message_create('big', convert_to(repeat('x', 16777216), 'UTF8')) IS NOT NULL, '16 MiB of content is accepted');

-- max_size: dropped messages store nothing.
SELECT lonnymq.channel_set('small', p_max_size => 2);
SELECT lonnymq.message_create('small', 'a'), lonnymq.message_create('small', 'b');
SELECT is(
    ARRAY[lonnymq.message_create('small', 'c')::text, pg_temp.lmq_count('small')::text],
    ARRAY[NULL, '2'],
    'a full channel returns NULL and stores nothing'
);

SELECT * FROM finish();
ROLLBACK;
