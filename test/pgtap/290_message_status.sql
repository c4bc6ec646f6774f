\ir include/setup.psql
-- message_status (0.16.0): a message's status by id, as channel_stats counts
-- it, through the queue, the dead letters and the history.
SELECT plan(14);

SELECT throws_ok($$SELECT * FROM lonnymq.message_status(NULL)$$, '22004', NULL, 'a NULL id: 22004');
SELECT throws_ok($$SELECT * FROM lonnymq.message_status(0)$$, '22023', NULL, 'id 0: 22023');

SELECT lonnymq.message_create('s', 'ready') AS ready_id \gset
SELECT lonnymq.message_create('s', 'later', pg_temp.lmq_now() + 3600000) AS later_id \gset
SELECT throws_ok(
    format('SELECT * FROM lonnymq.message_status(%s)', :later_id + 1), '22023', NULL,
    'an id above the last one given: 22023');
SELECT results_eq(
    format('SELECT status, channel, num_attempts, ended_at FROM lonnymq.message_status(%s)', :ready_id),
    $$VALUES ('ready', 's'::text, 0, NULL::bigint)$$, 'a due message is ready');
SELECT results_eq(
    format('SELECT status, dequeue_at > %s FROM lonnymq.message_status(%s)', pg_temp.lmq_now(), :later_id),
    $$VALUES ('scheduled', TRUE)$$, 'a future one is scheduled, with its time');

SELECT d.id AS locked_id, d.num_attempts AS locked_token FROM lonnymq.message_dequeue(60000, 1, 's') AS d \gset
SELECT results_eq(
    format('SELECT status, num_attempts FROM lonnymq.message_status(%s)', :locked_id),
    $$VALUES ('locked', 1)$$, 'a delivered one is locked, with its attempts');

-- A held message (its channel at max_concurrency) is ready, as channel_stats counts it.
SELECT lonnymq.channel_set('limited', p_max_concurrency => 1);
SELECT lonnymq.message_create('limited', 'first'), lonnymq.message_create('limited', 'second') AS held_id \gset
SELECT lonnymq.message_dequeue(60000, 1, 'limited');
SELECT lonnymq.message_dequeue(60000, 1, 'limited');
SELECT is(
    (SELECT status FROM lonnymq.message_status(:held_id)), 'ready',
    'a message its channel''s limit holds is ready');
SELECT is(
    (SELECT ready FROM lonnymq.channel_stats('limited')), 1::bigint, 'as channel_stats counts it');

-- An expired lock stays locked until a dequeue recovers it.
SELECT lonnymq.message_create('x', 'expiring') AS expiring_id \gset
SELECT lonnymq.message_dequeue(1, 1, 'x');
SELECT pg_sleep(0.005);
SELECT is((SELECT status FROM lonnymq.message_status(:expiring_id)), 'locked', 'an expired lock is locked');

SELECT lonnymq.channel_set('mortal', p_max_attempts => 1);
SELECT lonnymq.message_create('mortal', 'm') AS dead_id \gset
SELECT lonnymq.message_fail(d.id, d.num_attempts, 'boom') FROM lonnymq.message_dequeue(60000, 1, 'mortal') AS d;
SELECT results_eq(
    format('SELECT status, channel, num_attempts, ended_at IS NOT NULL FROM lonnymq.message_status(%s)', :dead_id),
    $$VALUES ('dead', 'mortal'::text, 1, TRUE)$$, 'a dead letter is dead, with when it died');

SELECT lonnymq.channel_set('kept', p_retain_history => TRUE);
SELECT lonnymq.message_create('kept', 'k') AS done_id \gset
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'kept') AS d;
SELECT results_eq(
    format('SELECT status, channel, ended_at IS NOT NULL FROM lonnymq.message_status(%s)', :done_id),
    $$VALUES ('done', 'kept'::text, TRUE)$$, 'a completed one kept in the history is done');

SELECT lonnymq.message_complete(:locked_id, :locked_token);
SELECT results_eq(
    format('SELECT status, channel FROM lonnymq.message_status(%s)', :locked_id),
    $$VALUES ('gone', NULL::text)$$, 'a completed one without history is gone');
SELECT lonnymq.message_cancel(:later_id);
SELECT is((SELECT status FROM lonnymq.message_status(:later_id)), 'gone', 'so is a cancelled one');

-- A wake (schedule '') is no message.
SELECT lonnymq.message_create('limited', 'third');
INSERT INTO lonnymq.message (channel_id, channel, dequeue_at, created_at, content, schedule)
VALUES (lonnymq._channel_id('limited'), 'limited', pg_temp.lmq_now() + 3600000, pg_temp.lmq_now(), '', '')
RETURNING id AS wake_id \gset
SELECT is((SELECT status FROM lonnymq.message_status(:wake_id)), 'gone', 'a wake is no message: gone');

SELECT * FROM finish();
ROLLBACK;
