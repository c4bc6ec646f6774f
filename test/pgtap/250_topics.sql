\ir include/setup.psql
-- Topics (topic_bind, topic_unbind, topic_routes, message_publish,
-- message_publish_batch; 0.12.0).  Matching against AMQP's rules and the
-- bounded reads are in test/python/test_topics.py.
SELECT plan(18);

-- ---------------------------------------------------------------- bad input
SELECT throws_ok($$SELECT lonnymq.topic_bind(NULL, 'c')$$, '22004', NULL, 'a NULL pattern: 22004');
SELECT throws_ok($$SELECT lonnymq.topic_bind('', 'c')$$, '22023', NULL, 'an empty pattern: 22023');
SELECT throws_ok($$SELECT lonnymq.topic_bind(repeat('a', 256), 'c')$$, '22023', NULL, 'a pattern of 256 characters: 22023');
SELECT throws_ok($$SELECT lonnymq.topic_bind('a', NULL)$$, '22004', NULL, 'a NULL channel: 22004');
SELECT throws_ok($$SELECT lonnymq.topic_bind('a', 'c-*')$$, '22023', NULL, 'a channel pattern: 22023');
SELECT throws_ok($$SELECT lonnymq.topic_unbind('a', '')$$, '22023', NULL, 'unbind of an empty channel: 22023');
SELECT throws_ok($$SELECT lonnymq.topic_routes(NULL)$$, '22004', NULL, 'routes of a NULL key: 22004');
SELECT throws_ok($$SELECT lonnymq.message_publish(NULL, 'x')$$, '22004', NULL, 'publish with a NULL key: 22004');
SELECT throws_ok($$SELECT lonnymq.message_publish('a', NULL)$$, '22004', NULL, 'publish of a NULL content: 22004');
SELECT throws_ok(
    $$SELECT lonnymq.message_publish('a', 'x', p_key => '')$$, '22023', NULL, 'publish with an empty dedup key: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.message_publish_batch('a', ARRAY['x', NULL]::bytea[])$$, '22004', NULL,
    'a batch with a NULL content: 22004');
SELECT throws_ok(
    $$SELECT lonnymq.message_publish('a', 'x', p_require_route => TRUE)$$, 'P0002', NULL,
    'nothing bound, with p_require_route: P0002');
SELECT is((SELECT count(*) FROM lonnymq.topic_binding), 0::bigint, 'no binding was stored');

-- ---------------------------------------------------------------- fan-out
SELECT ok(lonnymq.topic_bind('order.*', 'mail'), 'order.* bound to mail');
SELECT ok(NOT lonnymq.topic_bind('order.*', 'mail'), 'a second bind finds it bound');
SELECT lonnymq.topic_bind('order.#', 'mail'), lonnymq.topic_bind('#.paid', 'billing'), lonnymq.topic_bind('order.paid', 'audit');
SELECT is(
    (SELECT array_agg(r ORDER BY r) FROM lonnymq.topic_routes('order.paid') AS r), ARRAY['audit', 'billing', 'mail'],
    'order.paid reaches audit (exact), billing (#.paid) and mail once (order.* and order.#)');
SELECT is(lonnymq.message_publish('order.paid', 'x'), 3, 'a publish creates one message in each');
SELECT is(
    (SELECT array_agg(channel ORDER BY channel) FROM lonnymq.message), ARRAY['audit', 'billing', 'mail'],
    'one message per channel');

SELECT * FROM finish();
ROLLBACK;
