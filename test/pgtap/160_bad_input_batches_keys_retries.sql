\ir include/setup.psql
-- Bad input to the calls of batches, keys, retries and dead letters, history,
-- schedules and pausing (the calls 0.2.0 added; 070 has the core calls): each
-- is refused with its SQLSTATE (or returns its "nothing done" value) and
-- changes nothing.

\ir include/outcome.psql

-- A queue with something in every state: a full channel with limits, a
-- locked message, a held key, history, a dead letter, a schedule, a paused channel.
SELECT lonnymq.channel_set('lim', 1, 3, 0, p_max_attempts => 2, p_dedup_window_ms => 3600000, p_retain_history => TRUE);
SELECT lonnymq.message_create('lim', 'a', NULL, 'ka'), lonnymq.message_create('lim', 'b'), lonnymq.message_create('lim', 'c');
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'lim') AS d;
SELECT d.id AS held_id, d.num_attempts AS held_token FROM lonnymq.message_dequeue(60000, 1, 'lim') AS d \gset
SELECT lonnymq.message_create('lim', 'd');
SELECT lonnymq.message_create('free', 'x', NULL, 'kx') AS free_id, lonnymq.message_create('free', 'later', 4102444800000) AS later_id \gset
SELECT lonnymq.channel_set('dl', p_max_attempts => 1);
SELECT lonnymq.message_create('dl', 'dead');
SELECT lonnymq.message_fail(d.id, d.num_attempts, 'gone') FROM lonnymq.message_dequeue(60000, 1, 'dl') AS d;
SELECT lonnymq.schedule_set('sch', 'free', 'p', 3600000, 4102444800000);
SELECT lonnymq.channel_pause('pz');

CREATE TEMP TABLE bad (call text, expected text);
INSERT INTO bad VALUES
    -- message_create_batch
    ($$ SELECT lonnymq.message_create_batch(NULL, ARRAY['x']::bytea[]) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_create_batch('', ARRAY['x']::bytea[]) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch(repeat('n', 256), ARRAY['x']::bytea[]) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch('free', NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_create_batch('free', ARRAY['x', NULL]::bytea[]) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_create_batch('free', ARRAY['x', 'y']::bytea[], ARRAY[1]::bigint[]) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch('free', ARRAY['x', 'y']::bytea[], ARRAY[1, 2, 3]::bigint[]) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch('free', ARRAY['x', 'y']::bytea[], NULL, ARRAY['k']) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch('free', ARRAY['x']::bytea[], '{}'::bigint[]) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch('free', '{}'::bytea[], ARRAY[1]::bigint[]) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch('free', array_fill('x'::bytea, ARRAY[10001])) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch('free', ARRAY[['x', 'y'], ['z', 'w']]::bytea[]) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch('free', ARRAY['x', convert_to(repeat('x', 16777217), 'UTF8')]) $$, 'error 54000'),
    ($$ SELECT lonnymq.message_create_batch('free', ARRAY['x', 'y']::bytea[], NULL, ARRAY['k', '']) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create_batch('free', ARRAY['x', 'y']::bytea[], NULL, ARRAY[repeat('k', 1025), 'k']) $$, 'error 22023'),
    ($$ SELECT count(*) FROM lonnymq.message_create_batch('free', '{}'::bytea[]) $$, 'returned 0'),
    ($$ SELECT count(t.id) FROM lonnymq.message_create_batch('lim', ARRAY['over', 'over']::bytea[]) AS t (id) $$, 'returned 0'),
    -- message_create's key
    ($$ SELECT lonnymq.message_create('free', 'x', NULL, '') $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create('free', 'x', NULL, repeat('k', 1025)) $$, 'error 22023'),
    -- message_complete_batch
    ($$ SELECT lonnymq.message_complete_batch(NULL, ARRAY[1]) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_complete_batch(ARRAY[1]::bigint[], NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_complete_batch(ARRAY[1, 2]::bigint[], ARRAY[1]) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_complete_batch('{}'::bigint[], ARRAY[1]) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_complete_batch(ARRAY[1, NULL]::bigint[], ARRAY[1, 1]) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_complete_batch(ARRAY[1, 2]::bigint[], ARRAY[1, NULL]::integer[]) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_complete_batch(array_fill(1::bigint, ARRAY[10001]), array_fill(1, ARRAY[10001])) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_complete_batch(ARRAY[[1, 2], [3, 4]]::bigint[], ARRAY[[1, 1], [1, 1]]) $$, 'error 22023'),
    (format($$ SELECT lonnymq.message_complete_batch(ARRAY[%s, NULL], ARRAY[%s, 1]) $$, :held_id, :held_token), 'error 22004'),
    (format($$ SELECT lonnymq.message_complete_batch(ARRAY[%s, %s], ARRAY[%s, 1]) $$, :held_id, :free_id, :held_token + 1), 'returned 0'),
    ($$ SELECT lonnymq.message_complete_batch('{}', '{}') $$, 'returned 0'),
    -- message_fail
    ($$ SELECT lonnymq.message_fail(NULL, 1) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_fail(1, NULL) $$, 'error 22004'),
    (format($$ SELECT lonnymq.message_fail(%s, %s, repeat('e', 1048577)) $$, :held_id, :held_token), 'error 54000'),
    (format($$ SELECT lonnymq.message_fail(%s, %s, 'x') $$, :held_id, :held_token - 1), 'returned NULL'),
    (format($$ SELECT lonnymq.message_fail(%s, %s, 'x') $$, :held_id, :held_token + 1), 'returned NULL'),
    (format($$ SELECT lonnymq.message_fail(%s, 0, 'x') $$, :free_id), 'returned NULL'),
    ($$ SELECT lonnymq.message_fail(9223372036854775807, 1, 'x') $$, 'returned NULL'),
    -- message_cancel
    ($$ SELECT lonnymq.message_cancel(NULL) $$, 'error 22004'),
    (format($$ SELECT lonnymq.message_cancel(%s) $$, :held_id), 'returned false'),
    ($$ SELECT lonnymq.message_cancel(9223372036854775807) $$, 'returned false'),
    ($$ SELECT lonnymq.message_cancel(-1) $$, 'returned false'),
    -- dead_letter_redrive
    ($$ SELECT lonnymq.dead_letter_redrive('') $$, 'error 22023'),
    ($$ SELECT lonnymq.dead_letter_redrive(repeat('n', 256)) $$, 'error 22023'),
    ($$ SELECT lonnymq.dead_letter_redrive('no-such-channel') $$, 'returned 0'),
    ($$ SELECT lonnymq.dead_letter_redrive(NULL, ARRAY[9223372036854775807]) $$, 'returned 0'),
    ($$ SELECT lonnymq.dead_letter_redrive(NULL, '{}') $$, 'returned 0'),
    ($$ SELECT lonnymq.dead_letter_redrive('free') $$, 'returned 0'),
    -- history_prune
    ($$ SELECT lonnymq.history_prune(NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.history_prune(-1) $$, 'error 22023'),
    ($$ SELECT lonnymq.history_prune(-9223372036854775808) $$, 'error 22023'),
    ($$ SELECT lonnymq.history_prune(3600000) $$, 'returned 0'),
    -- schedule_set / schedule_drop
    ($$ SELECT lonnymq.schedule_set(NULL, 'free', 'p', 1000) $$, 'error 22004'),
    ($$ SELECT lonnymq.schedule_set('', 'free', 'p', 1000) $$, 'error 22023'),
    ($$ SELECT lonnymq.schedule_set(repeat('s', 256), 'free', 'p', 1000) $$, 'error 22023'),
    ($$ SELECT lonnymq.schedule_set('sch', NULL, 'p', 1000) $$, 'error 22004'),
    ($$ SELECT lonnymq.schedule_set('sch', '', 'p', 1000) $$, 'error 22023'),
    ($$ SELECT lonnymq.schedule_set('sch', repeat('n', 256), 'p', 1000) $$, 'error 22023'),
    ($$ SELECT lonnymq.schedule_set('sch', 'free', NULL, 1000) $$, 'error 22004'),
    ($$ SELECT lonnymq.schedule_set('sch', 'free', 'p', NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.schedule_set('sch', 'free', 'p', 0) $$, 'error 22023'),
    ($$ SELECT lonnymq.schedule_set('sch', 'free', 'p', -1000) $$, 'error 22023'),
    ($$ SELECT lonnymq.schedule_set('sch', 'free', 'p', 31536000001) $$, 'error 22023'),
    ($$ SELECT lonnymq.schedule_set('sch', 'free', convert_to(repeat('x', 16777217), 'UTF8'), 1000) $$, 'error 54000'),
    ($$ SELECT lonnymq.schedule_drop(NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.schedule_drop('no-such-schedule') $$, 'returned false'),
    -- channel_pause / channel_resume
    ($$ SELECT lonnymq.channel_pause(NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.channel_pause('') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_pause('pz') $$, 'returned false'),
    ($$ SELECT lonnymq.channel_resume(NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.channel_resume('') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_resume('free') $$, 'returned false'),
    ($$ SELECT lonnymq.channel_resume('no-such-channel') $$, 'returned false'),
    -- channel_set: the parameters of 0.2.0
    ($$ SELECT lonnymq.channel_set('lim', p_max_attempts => 0) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_max_attempts => -1) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_base_ms => -1) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_base_ms => 31536000001) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_max_ms => -1) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_max_ms => 31536000001) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_factor => 0.5) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_factor => 0) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_factor => 1000.5) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_factor => 'NaN') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_factor => 'Infinity') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_jitter => 1.5) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_jitter => -0.1) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_backoff_jitter => 'NaN') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_dedup_window_ms => -1) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_dedup_window_ms => 31536000001) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('new-channel', p_max_attempts => 0) $$, 'error 22023'),
    -- channel_set: the notification payload (0.9.0)
    ($$ SELECT lonnymq.channel_set('lim', p_notify => TRUE, p_notify_payload => 'secret') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('lim', p_notify_payload => '') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('new-channel', p_notify_payload => 'ID') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set(NULL, p_max_attempts => 3) $$, 'error 22004');

SELECT plan((SELECT count(*)::integer FROM bad) + 4);
SELECT cmp_ok((SELECT count(*) FROM bad WHERE expected LIKE 'error%'), '>=', 60::bigint, 'at least 60 bad calls');

SELECT is(pg_temp.lmq_outcome(call), expected || ', nothing changed', call)
FROM bad;

-- The state is intact: the real token works, the policy is the one set.
SELECT is(
    (SELECT concat_ws(' ', max_concurrency, max_size, max_attempts, dedup_window_ms, retain_history) FROM lonnymq.channel WHERE name = 'lim'),
    '1 3 2 3600000 t',
    'the refused channel_set calls left the configuration alone'
);
SELECT is(lonnymq.message_fail(:held_id, :held_token, 'real'), 'retry', 'the real token still fails the message');
SELECT is((SELECT count(*) FROM lonnymq.channel WHERE name = 'new-channel'), 0::bigint, 'a refused channel_set creates no channel');

SELECT * FROM finish();
ROLLBACK;
