\ir include/setup.psql
SELECT plan(21);

SELECT is(pg_temp.lmq_take(), NULL, 'an empty queue delivers nothing');
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(1000) $$, 'nothing ready is an empty result, not an error');

-- Scheduling
SELECT lonnymq.message_create('s', 'future', pg_temp.lmq_now() + 3600000);
SELECT is(pg_temp.lmq_take(), NULL, 'a message is not delivered before its dequeue_at');
SELECT lonnymq.message_create('s', 'soon', pg_temp.lmq_now() + 300);
SELECT is(pg_temp.lmq_take(), NULL, 'nor a message due in 300 ms');
SELECT pg_sleep(0.35);
SELECT is(pg_temp.lmq_take(), 's:soon', 'it is delivered once due, before the later one');
SELECT is(pg_temp.lmq_take(), NULL, 'and the future message still waits');

-- Priority within a channel: a past or negative dequeue_at goes first.
SELECT lonnymq.message_create('p', 'normal1'), lonnymq.message_create('p', 'normal2');
SELECT lonnymq.message_create('p', 'urgent', -1000);
SELECT lonnymq.message_create('p', 'urgent-zero', 0);
SELECT is(pg_temp.lmq_take_all(4), ARRAY['p:urgent', 'p:urgent-zero', 'p:normal1', 'p:normal2'],
    'within a channel: (dequeue_at, id) order, priority messages first');

-- Round-robin across channels, in the order they became ready.
SELECT lonnymq.message_create('A', convert_to('a' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT lonnymq.message_create('B', convert_to('b' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT lonnymq.message_create('C', convert_to('c' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT is(pg_temp.lmq_take_all(4), ARRAY['A:a1', 'B:b1', 'C:c1', 'A:a2'], 'channels are served round-robin');

-- A busy channel's urgent message reorders that channel only.
SELECT lonnymq.message_create('A', 'a-urgent', -1000000);
SELECT is(pg_temp.lmq_take_all(3), ARRAY['B:b2', 'C:c2', 'A:a-urgent'],
    'an urgent message in a busy channel does not move the channel ahead');

-- A new channel with an urgent message joins at the back.
SELECT lonnymq.message_create('D', 'd-urgent', -9000000000000);
SELECT is(pg_temp.lmq_take_all(4), ARRAY['B:b3', 'C:c3', 'A:a3', 'D:d-urgent'],
    'a new channel with an urgent message joins the rotation at the back');
SELECT is(pg_temp.lmq_take(), NULL, 'everything was delivered once');

-- An idle channel that gets an urgent message joins at the back too.
SELECT lonnymq.message_create('E', 'e1'), lonnymq.message_create('F', 'f1'), lonnymq.message_create('G', 'g1');
SELECT is(pg_temp.lmq_take(), 'E:e1', 'E first');
SELECT lonnymq.message_complete(m.id, m.num_attempts)
FROM lonnymq.message AS m JOIN lonnymq.channel AS c ON c.id = m.channel_id WHERE c.name = 'E';
SELECT is(pg_temp.lmq_take(60000, 'E'), NULL, 'E is empty now');
-- (Since 0.4.0 E went to wait when its only message was served, until that
-- lock's expiry: it is not eligible, and a producer leaves a wake-up.)
SELECT ok((SELECT wait_at IS NOT NULL AND (next_at IS NULL OR next_at > pg_temp.lmq_now())
           FROM lonnymq.channel WHERE name = 'E'),
    'and is out of the eligible rotation, waiting for a wake-up');
SELECT lonnymq.message_create('E', 'e-urgent', -9000000000000);
SELECT is(pg_temp.lmq_take_all(3), ARRAY['F:f1', 'G:g1', 'E:e-urgent'],
    'an idle channel with an urgent message waits for the channels already waiting');

-- A batch shares itself among channels as a one-at-a-time rotation would.
SELECT lonnymq.message_create('K', 'k1');
SELECT lonnymq.message_create('L', convert_to('l' || g, 'UTF8')) FROM generate_series(1, 5) AS g;
SELECT lonnymq.message_create('M', convert_to('m' || g, 'UTF8')) FROM generate_series(1, 5) AS g;
SELECT is(pg_temp.lmq_take_all(8), ARRAY['K:k1', 'L:l1', 'M:m1', 'L:l2', 'M:m2', 'L:l3', 'M:m3', 'L:l4'],
    'a batch of 8 over channels holding 1, 5 and 5: round-robin, the short channel drops out');
SELECT is(pg_temp.lmq_take_all(3), ARRAY['M:m4', 'L:l5', 'M:m5'], 'and the next batch continues the rotation where it stopped');

-- p_channel restricts delivery to one channel; p_limit bounds the batch.
SELECT lonnymq.message_create('X', convert_to('x' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT lonnymq.message_create('Y', convert_to('y' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT is(
    (SELECT array_agg(convert_from(d.content, 'UTF8')) FROM lonnymq.message_dequeue(60000, 2, 'Y') AS d),
    ARRAY['y1', 'y2'],
    'p_channel delivers from that channel only, up to p_limit'
);
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(60000, 1, 'no-such-channel') $$,
    'an unknown p_channel delivers nothing');
SELECT is(
    (SELECT count(*) FROM lonnymq.message_dequeue(60000, 1000)),
    4::bigint,
    'a large p_limit returns what is ready'
);
SELECT is(
    (SELECT count(*) FROM lonnymq.message_dequeue(60000, NULL, NULL)),
    0::bigint,
    'NULL p_limit and p_channel mean the defaults'
);

SELECT * FROM finish();
ROLLBACK;
