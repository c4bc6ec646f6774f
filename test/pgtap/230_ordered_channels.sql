\ir include/setup.psql
-- Ordered channels (channel_set p_ordered, 0.12.0): one message at a time,
-- and a failed or deferred message keeps its admission, so the next one is
-- not admitted before it is completed, dead-lettered or cancelled.  The
-- waits for a retry's time are in test/python/test_ordered_channels.py.
SELECT plan(12);

-- ---------------------------------------------------------------- bad input
SELECT throws_ok(
    $$SELECT lonnymq.channel_set('o', p_ordered => TRUE, p_max_concurrency => 2)$$,
    '22023', NULL, 'ordered with max_concurrency 2: 22023');
SELECT is((SELECT count(*) FROM lonnymq.channel WHERE name = 'o'), 0::bigint, 'and nothing was stored');

-- ---------------------------------------------------------------- configuration
SELECT lonnymq.channel_set('o', p_ordered => TRUE, p_backoff_base_ms => 3600000, p_backoff_jitter => 0);
SELECT is(
    (SELECT (max_concurrency, is_ordered)::text FROM lonnymq.channel WHERE name = 'o'), '(1,t)',
    'an ordered channel is stored one at a time');
SELECT lonnymq.channel_set('o', p_ordered => TRUE, p_max_concurrency => 1, p_backoff_base_ms => 3600000, p_backoff_jitter => 0);
SELECT is((SELECT max_concurrency FROM lonnymq.channel WHERE name = 'o'), 1, 'max_concurrency 1 is accepted');

-- ---------------------------------------------------------------- a fail keeps the place
SELECT lonnymq.message_create('o', 'A') AS a_id \gset
SELECT lonnymq.message_create('o', 'B') AS b_id \gset
SELECT id AS got, num_attempts AS tok FROM lonnymq.message_dequeue(60000, 1, 'o') \gset
SELECT is(:got, :a_id, 'A is delivered first');
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'o')), 0::bigint, 'nothing more while A is locked');
SELECT is(lonnymq.message_fail(:got, :tok, 'boom'), 'retry', 'A is failed: a retry in an hour');
SELECT is(
    (SELECT (is_admitted, is_held, position IS NULL)::text FROM lonnymq.message WHERE id = :a_id), '(t,f,t)',
    'A keeps its admission, scheduled for its retry');
SELECT is((SELECT num_admitted FROM lonnymq.channel WHERE name = 'o'), 1, 'the channel counts it');
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'o')), 0::bigint, 'B is not delivered while A waits');

-- ---------------------------------------------------------------- a cancel frees it
SELECT ok(lonnymq.message_cancel(:a_id), 'A is cancelled');
SELECT is(
    (SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 1, 'o')), 'B',
    'then B is delivered');

SELECT * FROM finish();
ROLLBACK;
