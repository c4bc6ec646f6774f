\ir include/setup.psql
-- message_cancel, channel_pause and channel_resume.
SELECT plan(47);

-- Dequeue up to p_limit from one channel (all channels when NULL); "channel:content" in delivery order.
CREATE FUNCTION pg_temp.take(p_channel text, p_limit integer DEFAULT 100, p_lock_ms bigint DEFAULT 60000)
RETURNS text
LANGUAGE sql
AS $$
    SELECT string_agg(d.channel || ':' || convert_from(d.content, 'UTF8'), ',' ORDER BY d.ord)
    FROM lonnymq.message_dequeue(p_lock_ms, p_limit, p_channel)
        WITH ORDINALITY AS d (id, channel, content, state, num_attempts, dequeue_at, is_recovered, ord)
$$;

CREATE FUNCTION pg_temp.exists(p_id bigint)
RETURNS boolean
LANGUAGE sql
AS $$ SELECT EXISTS (SELECT 1 FROM lonnymq.message WHERE id = p_id) $$;

-- ---------------------------------------------------------------- cancel
SELECT lonnymq.message_create('c', 'ready') AS ready_id \gset
SELECT lonnymq.message_create('c', 'future', pg_temp.lmq_now() + 3600000) AS future_id \gset
SELECT lonnymq.message_create('c', 'deferred') AS deferred_id \gset
SELECT lonnymq.message_create('c', 'locked') AS locked_id \gset
SELECT lonnymq.message_create('c', 'expired') AS expired_id \gset
SELECT lonnymq.message_create('c', 'last') AS last_id \gset
SELECT is(pg_temp.take('c', 1, 60000), 'c:ready', '(ready is delivered first)');
SELECT lonnymq.message_defer(:ready_id, 1);
SELECT is(pg_temp.take('c', 1, 60000), 'c:deferred', '(then deferred)');
SELECT lonnymq.message_defer(:deferred_id, 1, pg_temp.lmq_now() + 3600000);
SELECT is(pg_temp.take('c', 1, 60000), 'c:locked', '(locked)');
SELECT is(pg_temp.take('c', 1, 1), 'c:expired', '(expired, with a 1 ms lock)');
SELECT pg_sleep(0.005);

SELECT is(lonnymq.message_cancel(:ready_id), TRUE, 'cancel a waiting (deferred to now) message: true');
SELECT is(lonnymq.message_cancel(:future_id), TRUE, 'cancel a scheduled message: true');
SELECT is(lonnymq.message_cancel(:deferred_id), TRUE, 'cancel a message deferred to the future: true');
SELECT is(ARRAY[pg_temp.exists(:ready_id), pg_temp.exists(:future_id), pg_temp.exists(:deferred_id)], ARRAY[FALSE, FALSE, FALSE],
    'they are gone');
SELECT m::text AS locked_row FROM lonnymq.message AS m WHERE m.id = :locked_id \gset
SELECT m::text AS expired_row FROM lonnymq.message AS m WHERE m.id = :expired_id \gset
SELECT is(lonnymq.message_cancel(:locked_id), FALSE, 'cancel a locked message: false');
SELECT is(lonnymq.message_cancel(:expired_id), FALSE, 'cancel a message whose lock has expired: false');
SELECT is(
    (SELECT string_agg(m::text, ',' ORDER BY m.id) FROM lonnymq.message AS m WHERE m.id IN (:locked_id, :expired_id)),
    :'locked_row' || ',' || :'expired_row',
    'and both are unchanged'
);
SELECT is(lonnymq.message_cancel(:ready_id), FALSE, 'cancel again: false');
SELECT is(lonnymq.message_cancel(9223372036854775807), FALSE, 'cancel an unknown id: false');
SELECT is(pg_temp.take('c', 10, 60000), 'c:last,c:expired', 'the cancelled messages are never delivered');

-- max_size: a cancel frees room.
SELECT lonnymq.channel_set('cs', p_max_size => 2);
SELECT lonnymq.message_create('cs', 'a') AS cs_a, lonnymq.message_create('cs', 'b') AS cs_b \gset
SELECT is(lonnymq.message_create('cs', 'c'), NULL, 'the channel is full');
SELECT is(lonnymq.message_cancel(:cs_a), TRUE, 'cancel one');
SELECT is((SELECT num_removed FROM lonnymq.channel WHERE name = 'cs'), 1::bigint, 'the removal is counted');
SELECT is(
    ARRAY[lonnymq.message_create('cs', 'd') IS NULL, lonnymq.message_create('cs', 'e') IS NULL],
    ARRAY[FALSE, TRUE],
    'room for exactly one more'
);
SELECT is(pg_temp.take('cs'), 'cs:b,cs:d', 'the channel holds the two messages');

-- ---------------------------------------------------------------- pause
SELECT lonnymq.message_create('p', convert_to('p' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT lonnymq.message_create('o', 'o1');
SELECT is(pg_temp.take('p', 1, 60000), 'p:p1', 'p1 locked');
SELECT d.id AS p1_id FROM lonnymq.message AS d WHERE d.content = 'p1' \gset
SELECT is(pg_temp.take('p', 1, 1), 'p:p2', 'p2 locked for 1 ms');
SELECT is(lonnymq.channel_pause('p'), TRUE, 'channel_pause: true');
SELECT is((SELECT is_paused FROM lonnymq.channel WHERE name = 'p'), TRUE, 'the channel is paused');
SELECT pg_sleep(0.005);
SELECT is(pg_temp.take(NULL), 'o:o1', 'a paused channel delivers nothing; other channels are unaffected');
SELECT is(pg_temp.take('p'), NULL, 'not even with p_channel, nor its expired lock');
SELECT lonnymq.message_create('p', 'p4') AS p4_id \gset
SELECT ok(pg_temp.exists(:p4_id), 'a paused channel accepts messages');
SELECT is(pg_temp.take(NULL), NULL, 'and still delivers nothing');
SELECT is(lonnymq.message_heartbeat(:p1_id, 1, 60000), TRUE, 'a locked message of a paused channel can be heartbeated');
SELECT is(lonnymq.message_complete(:p1_id, 1), TRUE, 'and completed');
SELECT is(lonnymq.channel_pause('p'), FALSE, 'pausing a paused channel: false');
SELECT lonnymq.channel_set('p', p_max_concurrency => 5);
SELECT is((SELECT is_paused FROM lonnymq.channel WHERE name = 'p'), TRUE, 'channel_set keeps it paused');
SELECT is(pg_temp.take('p'), NULL, 'and it still delivers nothing');

-- A channel that a consumer had emptied, given a message (ready, with its
-- place in the round order) and then paused.
SELECT lonnymq.message_create('i', 'i0');
SELECT is(pg_temp.take('i'), 'i:i0', 'i0');
SELECT lonnymq.message_complete(m.id, m.num_attempts) FROM lonnymq.message AS m WHERE m.content = 'i0';
SELECT is(pg_temp.take('i'), NULL, '(i is idle now)');
SELECT lonnymq.message_create('i', 'i1');
SELECT lonnymq.channel_pause('i');
SELECT is(pg_temp.take(NULL), NULL, 'a message made ready before the pause is not delivered from a paused channel');

-- An unknown channel is created paused.
SELECT is(lonnymq.channel_pause('new'), TRUE, 'pausing an unknown channel: true');
SELECT is((SELECT is_paused FROM lonnymq.channel WHERE name = 'new'), TRUE, 'it exists, paused');
SELECT lonnymq.message_create('new', 'n1');
SELECT is(pg_temp.take(NULL), NULL, 'and delivers nothing');

-- ---------------------------------------------------------------- resume
SELECT is(lonnymq.channel_resume('p'), TRUE, 'channel_resume: true');
SELECT is((SELECT is_paused FROM lonnymq.channel WHERE name = 'p'), FALSE, 'the channel is not paused');
SELECT is(pg_temp.take(NULL), 'p:p3,p:p4,p:p2', 'deliveries resume in order (the expired lock when its time comes)');
SELECT is(pg_temp.take('p'), NULL, '(nothing else in p)');
SELECT is(lonnymq.channel_resume('p'), FALSE, 'resuming a channel that is not paused: false');
SELECT is(lonnymq.channel_resume('nowhere'), FALSE, 'resuming an unknown channel: false');
SELECT is((SELECT count(*) FROM lonnymq.channel WHERE name = 'nowhere'), 0::bigint, 'and does not create it');
SELECT ok(lonnymq.channel_resume('i') AND lonnymq.channel_resume('new'), 'resume the others');
SELECT is(pg_temp.take(NULL), 'i:i1,new:n1', 'their messages are delivered');

SELECT * FROM finish();
ROLLBACK;
