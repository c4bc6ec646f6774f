\ir include/setup.psql
-- A dequeue that serves a channel's last deliverable message (and moves
-- the channel: it was not alone) sends the channel to wait in the same
-- write, until its first lock's expiry: so the channel's next message joins
-- the rotation at the back as of its arrival, as a channel that became
-- ready then, and the channel is not visited, and found empty, before.
SELECT plan(41);

SELECT lonnymq.message_create('A', 'a1');
SELECT lonnymq.message_create('B', 'b1'), lonnymq.message_create('B', 'b2');
SELECT is(pg_temp.lmq_take(), 'A:a1', 'A is served first');
SELECT is(
    (SELECT c.wait_at FROM lonnymq.channel AS c WHERE c.name = 'A'),
    (SELECT m.dequeue_at FROM lonnymq.message AS m JOIN lonnymq.channel AS c ON c.id = m.channel_id WHERE c.name = 'A'),
    'A, with nothing deliverable left, waits for its lock''s expiry'
);
SELECT ok(
    (SELECT c.next_at > pg_temp.lmq_now() FROM lonnymq.channel AS c WHERE c.name = 'A'),
    'and is not eligible before it'
);
SELECT is(pg_temp.lmq_take(), 'B:b1', 'B next');
SELECT ok(
    (SELECT c.wait_at IS NULL AND c.next_at <= pg_temp.lmq_now() FROM lonnymq.channel AS c WHERE c.name = 'B'),
    'B, with a message left, stays in the rotation'
);
SELECT lonnymq.message_create('A', 'a2');
SELECT is(
    (SELECT count(*) FROM lonnymq.channel_wake AS w JOIN lonnymq.channel AS c ON c.id = w.channel_id WHERE c.name = 'A'),
    1::bigint,
    'a new message for the waiting channel leaves a wake-up'
);
SELECT is(pg_temp.lmq_take_all(3), ARRAY['B:b2', 'A:a2'],
    'and is delivered, after the channel that was already in the rotation');

-- A lock that expires while its channel waits: the wait ends at the expiry.
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

-- A channel with max_concurrency served one message at a time: its count
-- and its wait at the limit, as the general way keeps them.
SELECT lonnymq.channel_set('M', p_max_concurrency => 2);
SELECT lonnymq.message_create('M', convert_to('m' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT d.id AS m1, d.num_attempts AS m1tok FROM lonnymq.message_dequeue(60000) AS d \gset
SELECT is(pg_temp.lmq_take(), 'M:m2', 'M gives its second message');
SELECT is((SELECT num_locked FROM lonnymq.channel WHERE name = 'M'), 2, 'M counts 2 locked');
SELECT ok(
    (SELECT c.wait_at IS NULL AND c.next_at = (SELECT min(m.dequeue_at) FROM lonnymq.message AS m WHERE m.channel_id = c.id AND m.is_locked)
     FROM lonnymq.channel AS c WHERE c.name = 'M'),
    'and, at its max_concurrency, waits for its first lock''s expiry'
);
SELECT is(pg_temp.lmq_take(), NULL, 'so its third message waits');
SELECT lonnymq.message_complete(:m1, :m1tok);
SELECT is(pg_temp.lmq_take(), 'M:m3', 'a complete frees a slot: the third message is delivered');
SELECT is((SELECT num_locked FROM lonnymq.channel WHERE name = 'M'), 2, 'M counts 2 locked again');


-- A waiting channel that is served from the rotation takes its pending
-- wake-ups with it (channel_set brings a waiting channel's turn forward
-- without ending its wait; a producer then leaves a wake-up).
SELECT lonnymq.message_create('W', 'w1');
SELECT lonnymq.message_create('V', 'v1');
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000) AS d;
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000) AS d;
SELECT lonnymq.channel_set('W');
-- (A millisecond apart at least: V's turn must be earlier than W's
-- wake-up, which a same-millisecond tie would put first.)
SELECT pg_sleep(0.005);
SELECT lonnymq.message_create('W', 'w2');
SELECT lonnymq.message_create('V', 'v2');
SELECT ok(
    (SELECT c.wait_at IS NOT NULL AND c.next_at <= pg_temp.lmq_now()
        AND EXISTS (SELECT 1 FROM lonnymq.channel_wake AS w WHERE w.channel_id = c.id)
     FROM lonnymq.channel AS c WHERE c.name = 'W'),
    'W is waiting, in the rotation, and has a wake-up'
);
SELECT is(pg_temp.lmq_take(), 'V:v2', 'V, the only channel when it was served, kept its place ahead of W');
SELECT is(pg_temp.lmq_take(), 'W:w2', 'W is served from the front of the rotation');
SELECT is(
    (SELECT count(*) FROM lonnymq.channel_wake AS w JOIN lonnymq.channel AS c ON c.id = w.channel_id WHERE c.name = 'W'),
    0::bigint,
    'and its wake-up is gone with it'
);

-- A channel woken from waiting and sent back to waiting: K and J wait for
-- their completed locks' expiry (I, served last and alone, stays in the
-- rotation: paused, it is out of the way); both get a message.
SELECT lonnymq.message_create('K', 'k1');
SELECT lonnymq.message_create('J', 'j1');
SELECT lonnymq.message_create('I', 'i1');
SELECT pg_temp.lmq_serve_and_complete(3) AS served \gset
SELECT is(:'served'::text, 'K:true J:true I:true', 'K, J and I are served and completed');
SELECT lonnymq.channel_pause('I');
SELECT c.wait_at AS k_wait, c.next_at AS k_next
FROM lonnymq.channel AS c WHERE c.name = 'K' \gset
SELECT ok(:k_wait > pg_temp.lmq_now() AND :k_next = :k_wait, 'K waits for its completed lock''s expiry');
SELECT lonnymq.message_create('K', 'k2');
SELECT lonnymq.message_create('J', 'j2');
SELECT is(pg_temp.lmq_take(), 'K:k2', 'K, woken first, is served');
SELECT is(pg_temp.lmq_take(60000, 'K'), NULL, 'and, with nothing deliverable left, gives nothing more');
SELECT is(
    (SELECT count(*) FROM lonnymq.channel_wake AS w JOIN lonnymq.channel AS c ON c.id = w.channel_id WHERE c.name = 'K'),
    0::bigint,
    'its wake-up is gone'
);
SELECT lonnymq.message_create('K', 'k3');
SELECT is(
    (SELECT count(*) FROM lonnymq.channel_wake AS w JOIN lonnymq.channel AS c ON c.id = w.channel_id WHERE c.name = 'K'),
    1::bigint,
    'a message before its wait_at leaves a wake-up'
);
SELECT is(pg_temp.lmq_take(), 'J:j2', 'J, woken second, is served');
SELECT is(pg_temp.lmq_take(), 'K:k3', 'then K''s new message is delivered');
-- A lock shorter than the wait: the row is written, and the wait ends at
-- the new lock's expiry (kept, recovery would wait for the old one).
SELECT lonnymq.channel_pause('K');
SELECT c.wait_at AS j_wait FROM lonnymq.channel AS c WHERE c.name = 'J' \gset
SELECT lonnymq.message_create('J', 'j3');
SELECT lonnymq.message_create('P', 'p1');
SELECT is(pg_temp.lmq_take(50), 'J:j3', 'J is served with a 50 ms lock');
SELECT ok(
    (SELECT c.wait_at < :j_wait AND c.next_at = c.wait_at FROM lonnymq.channel AS c WHERE c.name = 'J'),
    'its row is written: it waits for the 50 ms lock'
);
SELECT pg_sleep(0.1);
SELECT is(pg_temp.lmq_take_all(3), ARRAY['P:p1', 'J:j3'], 'which is recovered at its expiry');

-- A front of the rotation with nothing deliverable is put in its place and
-- the next front is served, in the same call.  U and V
-- are in the rotation (each had a second message when served); U's second
-- message is cancelled.
SELECT lonnymq.message_create('U', 'u1') AS u1 \gset
SELECT lonnymq.message_create('U', 'u2') AS u2 \gset
SELECT lonnymq.message_create('V', 'v1'), lonnymq.message_create('V', 'v2');
SELECT pg_temp.lmq_serve_and_complete(2) AS served \gset
SELECT lonnymq.message_cancel(:u2);
SELECT is(:'served' || ' ' || pg_temp.lmq_take(), 'U:true V:true V:v2',
    'U, first in the rotation but empty, is passed over for V');
SELECT is(pg_temp.lmq_take(), NULL, 'and nothing else is ready');
SELECT ok(
    (SELECT c.next_at IS NULL AND c.wait_at = 9223372036854775807 FROM lonnymq.channel AS c WHERE c.name = 'U'),
    'and U, empty, is out of the rotation'
);

-- A channel with max_concurrency woken, served and sent back to waiting
-- counts its lock.  The other channels are paused out of the way (Z too,
-- served last and alone: it stays in the rotation).
SELECT count(lonnymq.channel_pause(c.name)) FROM lonnymq.channel AS c;
SELECT lonnymq.channel_set('L', p_max_concurrency => 3);
SELECT lonnymq.message_create('L', 'l1');
SELECT lonnymq.message_create('O', 'o1');
SELECT lonnymq.message_create('Z', 'z1');
SELECT pg_temp.lmq_serve_and_complete(3) AS served \gset
SELECT is(
    :'served'::text,
    'L:true O:true Z:true',
    'L (max_concurrency 3), O and Z are served and completed'
);
SELECT lonnymq.channel_pause('Z');
SELECT c.wait_at AS l_wait, c.next_at AS l_next
FROM lonnymq.channel AS c WHERE c.name = 'L' \gset
SELECT ok(:l_wait > pg_temp.lmq_now() AND :l_next = :l_wait, 'L waits for its completed lock''s expiry');
SELECT lonnymq.message_create('L', 'l2');
SELECT lonnymq.message_create('O', 'o2');
SELECT is(pg_temp.lmq_take(), 'L:l2', 'L, woken first, is served');
SELECT is(
    (SELECT s.locked FROM lonnymq.channel_stats AS s WHERE s.channel = 'L'),
    1::bigint,
    'and counts its one lock'
);
SELECT is(pg_temp.lmq_take(), 'O:o2', 'then O');
SELECT is(
    (SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'L')),
    0::bigint,
    'L has nothing deliverable'
);

SELECT * FROM finish();
ROLLBACK;
