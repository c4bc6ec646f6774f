\ir include/setup.psql
-- A channel whose last message was served.  0.10.1 sent it to wait in its
-- row until its first lock's expiry; in 0.11.0 a channel without limits has
-- no row and a served message no place, so a drained channel costs nothing:
-- nothing of it is left to store or to visit, and its next message is a
-- channel becoming ready, which joins the round being served (right after
-- the place being served, or in the next round if its own place has
-- passed): delivered at once, never after another channel's second turn.
SELECT plan(21);

-- What lonnymq stores of a channel: its row, messages, quota and keys.
CREATE FUNCTION pg_temp.left_of(p_channel text)
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT (SELECT count(*) FROM lonnymq.channel AS c WHERE c.name = p_channel)
        + (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel = p_channel)
        + (SELECT count(*) FROM lonnymq.channel_quota AS q WHERE q.channel_id = lonnymq._channel_id(p_channel))
        + (SELECT count(*) FROM lonnymq.message_key AS k WHERE k.channel_id = lonnymq._channel_id(p_channel))
$$;

-- ---------------------------------------------------------------- drained, then ready again
SELECT lonnymq.message_create('A', 'a1');
SELECT count(*) FROM lonnymq.message_create_batch('B', ARRAY['b1', 'b2', 'b3', 'b4', 'b5']::bytea[]);
SELECT d.id AS a1, d.num_attempts AS a1tok, d.channel || ':' || convert_from(d.content, 'UTF8') AS got
FROM lonnymq.message_dequeue(60000) AS d \gset
SELECT is(:'got'::text, 'A:a1', 'A is served first');
SELECT is(lonnymq.message_complete(:a1, :a1tok), TRUE, 'and its last message completed');
SELECT is(pg_temp.left_of('A'), 0::bigint, 'nothing of A is left: no row, no message, no place');
SELECT is(ARRAY[pg_temp.lmq_take(), pg_temp.lmq_take()], ARRAY['B:b1', 'B:b2'], 'B, alone, is served');
SELECT lonnymq.message_create('A', 'a2');
SELECT is(
    ARRAY[pg_temp.lmq_take(), pg_temp.lmq_take(), pg_temp.lmq_take()],
    ARRAY['B:b3', 'A:a2', 'B:b4'],
    'A''s next message is delivered right after the place being served, before B''s next turn'
);
SELECT is(pg_temp.lmq_take(), 'B:b5', 'then B''s last');
SELECT is(pg_temp.lmq_take(), NULL, 'and nothing else is ready');

-- A lock that expires while its channel has nothing else: delivered again
-- at its expiry, recovered.
SELECT lonnymq.message_create('C', 'c1');
SELECT is(pg_temp.lmq_take(50), 'C:c1', 'C is served with a 50 ms lock');
SELECT is(pg_temp.lmq_take(), NULL, 'and is not delivered again before it expires');
SELECT pg_sleep(0.1);
SELECT is(
    (SELECT d.channel || ':' || convert_from(d.content, 'UTF8') || ':' || d.is_recovered
     FROM lonnymq.message_dequeue(60000) AS d),
    'C:c1:true',
    'after the expiry the message is delivered again, recovered'
);
SELECT is(pg_temp.lmq_take(), NULL, 'and nothing else is');

-- A channel with max_concurrency served to its limit and drained: its row
-- (its configuration) stays, with nothing admitted.
SELECT lonnymq.channel_set('M', p_max_concurrency => 2);
SELECT lonnymq.message_create('M', convert_to('m' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT d.id AS m1, d.num_attempts AS m1tok FROM lonnymq.message_dequeue(60000) AS d \gset
SELECT is(pg_temp.lmq_take(), 'M:m2', 'M gives its second message');
SELECT is(pg_temp.lmq_take(), NULL, 'and, at its max_concurrency, not its third');
SELECT lonnymq.message_complete(:m1, :m1tok);
SELECT is(pg_temp.lmq_take(), 'M:m3', 'a complete frees a place: the third message is delivered');
SELECT count(lonnymq.message_complete(m.id, m.num_attempts)) FROM lonnymq.message AS m WHERE m.channel = 'M';
SELECT is(
    (SELECT c.num_admitted || ' ' || pg_temp.left_of('M') FROM lonnymq.channel AS c WHERE c.name = 'M'),
    '0 1',
    'drained, M keeps its row and nothing else, with nothing admitted'
);
SELECT lonnymq.message_create('M', 'm4');
SELECT is(pg_temp.lmq_take(), 'M:m4', 'and its next message is delivered at once');

-- A cancelled message leaves no place: the take goes on to the next one.
SELECT lonnymq.message_create('U', 'u1') AS u1 \gset
SELECT lonnymq.message_create('U', 'u2') AS u2 \gset
SELECT lonnymq.message_create('V', 'v1'), lonnymq.message_create('V', 'v2');
SELECT pg_temp.lmq_serve_and_complete(2) AS served \gset
SELECT lonnymq.message_cancel(:u2);
SELECT is(:'served' || ' ' || pg_temp.lmq_take(), 'U:true V:true V:v2',
    'U, whose next message was cancelled, is passed over for V');
SELECT is(pg_temp.lmq_take(), NULL, 'and nothing else is ready');
SELECT is(pg_temp.left_of('U'), 0::bigint, 'and nothing of U is left');

-- ---------------------------------------------------------------- a thousand drained channels
-- One message in each of 1,000 channels, served and completed: nothing of
-- them is left, and the next message of any of them is delivered at once.
SELECT count(lonnymq.message_create('order-' || g, 'x')) FROM generate_series(1, 1000) AS g;
SELECT lonnymq.message_complete_batch(array_agg(d.id), array_agg(d.num_attempts))
FROM lonnymq.message_dequeue(60000, 1000) AS d;
SELECT is(
    (SELECT sum(pg_temp.left_of('order-' || g)) FROM generate_series(1, 1000) AS g),
    0::numeric,
    '1,000 channels served and completed leave nothing behind'
);
SELECT lonnymq.message_create('order-500', 'again');
SELECT is(pg_temp.lmq_take(), 'order-500:again', 'the next message of one of them is delivered at once');

SELECT * FROM finish();
ROLLBACK;
