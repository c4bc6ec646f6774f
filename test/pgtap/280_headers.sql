\ir include/setup.psql
-- Headers (0.16.0, doc/headers.md): a JSON object per message, given to the
-- create, batch and publish calls, returned with every delivery, and kept
-- through defer, retry, lock expiry, dead letter, redrive and history.  The
-- trace context they carry is tested with OpenTelemetry itself in
-- test/python/test_tracing.py.
SELECT plan(30);

-- ---------------------------------------------------------------- bad input
SELECT pg_temp.lmq_snapshot() AS before \gset
SELECT throws_ok(
    $$SELECT lonnymq.message_create('h', 'x', p_headers => '[1]')$$, '22023', NULL, 'headers that are an array: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.message_create('h', 'x', p_headers => '"traceparent"')$$, '22023', NULL,
    'headers that are a string: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.message_create('h', 'x', p_headers => 'null')$$, '22023', NULL,
    'headers that are JSON null: 22023');
-- {"a": "x...x"} is 9 bytes of JSON around the string.
SELECT throws_ok(
    $$SELECT lonnymq.message_create('h', 'x', p_headers => jsonb_build_object('a', repeat('x', 65536 - 9 + 1)))$$,
    '22023', NULL, 'headers of 64 KiB and one byte of JSON: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.message_create_batch('h', ARRAY['a', 'b']::bytea[], p_headers => ARRAY['{}', '2']::jsonb[])$$,
    '22023', 'lonnymq: p_headers[2] must be a JSON object, got a JSON number',
    'a batch whose second headers are a number: 22023, naming the element');
SELECT throws_ok(
    $$SELECT lonnymq.message_create_batch('h', ARRAY['a', 'b']::bytea[], p_headers => ARRAY['{}']::jsonb[])$$,
    '22023', NULL, 'fewer headers than contents: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.message_create_batch('h', ARRAY['a']::bytea[], p_headers => ARRAY[['{}']]::jsonb[])$$,
    '22023', NULL, 'a two-dimensional array of headers: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.message_publish('h.x', 'x', p_headers => '[]')$$, '22023', NULL,
    'a publish whose headers are an array, bound to no channel: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.message_publish_batch('h.x', ARRAY['a']::bytea[], p_headers => ARRAY['true']::jsonb[])$$,
    '22023', NULL, 'a publish batch whose headers are a boolean: 22023');
SELECT is(pg_temp.lmq_snapshot(), :'before', 'the refused calls changed nothing');

-- ---------------------------------------------------------------- delivered
SELECT lonnymq.message_create('h', 'x', p_headers => jsonb_build_object('a', repeat('x', 65536 - 9))) IS NOT NULL
    AS at_limit \gset
SELECT ok(:'at_limit', 'headers of exactly 64 KiB of JSON are taken');
SELECT is(
    (SELECT pg_catalog.octet_length(d.headers::text) FROM lonnymq.message_dequeue(60000, 1, 'h') AS d), 65536,
    'and delivered whole');
SELECT lonnymq.message_create('h', 'plain');
SELECT is(
    (SELECT d.headers FROM lonnymq.message_dequeue(60000, 1, 'h') AS d), NULL::jsonb,
    'a message created without headers is delivered with NULL headers');

SELECT lonnymq.message_create(
    'h', 'one', p_headers => '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "n": 1}'
);
SELECT is(
    (SELECT d.headers FROM lonnymq.message_complete_dequeue(NULL, NULL, 60000, 1, 'h') AS d),
    '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "n": 1}'::jsonb,
    'message_complete_dequeue returns the headers as given');

SELECT lonnymq.message_create_batch(
    'hb', ARRAY['a', 'b', 'c']::bytea[], p_headers => ARRAY['{"i": 1}', NULL, '{"i": 3}']::jsonb[]
);
SELECT is(
    (SELECT array_agg(coalesce(d.headers ->> 'i', '-') ORDER BY d.id) FROM lonnymq.message_dequeue(60000, 3, 'hb') AS d),
    ARRAY['1', '-', '3'], 'a batch gives each message its own headers (NULL: none)');

SELECT lonnymq.topic_bind('order.*', 'mail'), lonnymq.topic_bind('order.*', 'audit');
SELECT is(lonnymq.message_publish('order.paid', 'p', p_headers => '{"t": "pub"}'), 2, 'a publish reaches two channels');
SELECT is(
    (SELECT array_agg(d.headers ->> 't') FROM lonnymq.message_dequeue(60000, 10) AS d WHERE d.channel IN ('mail', 'audit')),
    ARRAY['pub', 'pub'], 'every copy of a published message carries its headers');
SELECT is(
    lonnymq.message_publish_batch('order.paid', ARRAY['a', 'b']::bytea[], p_headers => ARRAY['{"t": 1}', '{"t": 2}']::jsonb[]),
    4::bigint, 'a publish batch of two reaches two channels');
SELECT is(
    (SELECT array_agg(d.channel || (d.headers ->> 't') ORDER BY d.channel, d.id) FROM lonnymq.message_dequeue(60000, 10) AS d),
    ARRAY['audit1', 'audit2', 'mail1', 'mail2'], 'so does every copy of a published batch');

-- ---------------------------------------------------------------- kept
-- A defer, a failed attempt and an expired lock deliver it again with them.
SELECT lonnymq.channel_set('hk', p_max_attempts => 3, p_backoff_base_ms => 1, p_backoff_max_ms => 1, p_backoff_jitter => 0);
SELECT lonnymq.message_create('hk', 'k', p_headers => '{"k": "kept"}') AS kept_id \gset
SELECT lonnymq.message_defer(d.id, d.num_attempts, 0) FROM lonnymq.message_dequeue(60000, 1, 'hk') AS d;
SELECT is(
    (SELECT d.headers ->> 'k' FROM lonnymq.message_dequeue(60000, 1, 'hk') AS d), 'kept', 'after a defer');
SELECT lonnymq.message_fail(:kept_id, 2, 'boom');
SELECT pg_sleep(0.005);
SELECT is(
    (SELECT d.headers ->> 'k' FROM lonnymq.message_dequeue(1, 1, 'hk') AS d), 'kept', 'after a failed attempt');
SELECT pg_sleep(0.005);
SELECT results_eq(
    $$SELECT d.headers ->> 'k', d.is_recovered FROM lonnymq.message_dequeue(1, 1, 'hk') AS d$$,
    $$VALUES ('kept', TRUE)$$, 'after an expired lock');
SELECT pg_sleep(0.005);
-- The lock of the fourth delivery expired: its third failure, the last.
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'hk')), 0::bigint, 'nothing more to deliver');
SELECT is(
    (SELECT d.headers FROM lonnymq.dead_letter AS d WHERE d.id = :kept_id), '{"k": "kept"}'::jsonb,
    'the dead letter keeps them');
SELECT is(lonnymq.dead_letter_redrive('hk'), 1, 'the dead letter is redriven');
SELECT results_eq(
    $$SELECT d.headers ->> 'k', d.id = $$ || :kept_id || $$ FROM lonnymq.message_dequeue(60000, 1, 'hk') AS d$$,
    $$VALUES ('kept', TRUE)$$, 'the redriven message, its id kept, is delivered with them');

SELECT lonnymq.channel_set('hh', p_retain_history => TRUE);
SELECT lonnymq.message_create('hh', 'h', p_headers => '{"h": "history"}') AS hist_id \gset
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'hh') AS d;
SELECT is(
    (SELECT h.headers FROM lonnymq.message_history AS h WHERE h.id = :hist_id), '{"h": "history"}'::jsonb,
    'the history keeps them');

SELECT lonnymq.message_create('hc', 'c', p_headers => '{"c": 1}') AS cancel_id \gset
SELECT ok(lonnymq.message_cancel(:cancel_id), 'a message with headers is cancelled');
SELECT is(pg_temp.lmq_count('hc'), 0::bigint, 'and gone');
SELECT has_column('lonnymq', 'message', 'headers', 'message has headers');

SELECT * FROM finish();
ROLLBACK;
