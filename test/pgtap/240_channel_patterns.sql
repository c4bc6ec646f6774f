\ir include/setup.psql
-- Channels configured by a name pattern (channel_set 'prefix*', 0.12.0):
-- the channels a prefix starts without their own configuration follow the
-- longest one; under a limited pattern a channel has a row only while it
-- has admission counts.  More in test/python/test_channel_patterns.py.
SELECT plan(20);

-- ---------------------------------------------------------------- bad input
SELECT throws_ok(
    $$SELECT lonnymq.message_create('t-*', 'a')$$, '22023', NULL, 'a message into a pattern: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.message_create_batch('t-*', ARRAY['a']::bytea[])$$, '22023', NULL,
    'a batch into a pattern: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.schedule_set('s', 't-*', 'a', 1000)$$, '22023', NULL, 'a schedule into a pattern: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.channel_set('t-*', p_max_size => 5)$$, '0A000', NULL, 'max_size on a pattern: 0A000');
SELECT throws_ok($$SELECT lonnymq.channel_pause('t-*')$$, '0A000', NULL, 'a paused pattern: 0A000');
SELECT throws_ok(
    $$SELECT lonnymq.channel_set('t-*', p_ordered => TRUE, p_max_concurrency => 3)$$, '22023', NULL,
    'an ordered pattern of three at a time: 22023');
SELECT is((SELECT count(*) FROM lonnymq.channel), 0::bigint, 'and nothing was stored');
SELECT is((SELECT count(*) FROM lonnymq.message), 0::bigint, 'no message either');

-- ---------------------------------------------------------------- longest prefix
SELECT lonnymq.channel_set('t-*', p_max_attempts => 2);
SELECT lonnymq.channel_set('t-vip-*', p_max_attempts => 7);
SELECT lonnymq.channel_set('t-own', p_max_attempts => 5);
SELECT is(
    (SELECT (prefix, pattern)::text FROM lonnymq.channel WHERE name = 't-*'), '(t-,)',
    'a pattern''s row has its prefix');
SELECT is(
    (SELECT max_attempts FROM lonnymq.channel_stats('t-vip-1') RIGHT JOIN (SELECT 1) AS x ON TRUE), NULL::integer,
    'a channel without messages and a row is not listed');
SELECT lonnymq.message_create(c, 'x') FROM unnest(ARRAY['t-1', 't-vip-1', 't-own', 'u']) AS c;
SELECT is(
    (SELECT array_agg(max_attempts ORDER BY channel) FROM lonnymq.channel_stats WHERE channel IN ('t-1', 't-vip-1', 't-own', 'u')),
    ARRAY[2, 5, 7, NULL]::integer[],
    't-1 follows t-*, t-vip-1 the longer t-vip-*, t-own its own configuration, u the defaults');
SELECT is((SELECT count(*) FROM lonnymq.channel WHERE pattern IS NOT NULL), 0::bigint, 'a pattern without limits makes no rows');
SELECT ok(lonnymq.channel_drop('t-vip-*'), 'the longer pattern is dropped');
SELECT is((SELECT max_attempts FROM lonnymq.channel_stats('t-vip-1')), 2, 't-vip-1 follows t-* now');
SELECT ok(NOT lonnymq.channel_drop('t-vip-*'), 'a second drop finds nothing');

-- ---------------------------------------------------------------- limits, rows made and gone
SELECT lonnymq.channel_set('t-*', p_max_concurrency => 1);
SELECT is(
    (SELECT array_agg(name || ':' || num_admitted ORDER BY name) FROM lonnymq.channel WHERE pattern IS NOT NULL),
    ARRAY['t-1:0', 't-vip-1:0'],
    'limits on the pattern give its channels with messages a row of their own (its takes claim: no lock yet)');
SELECT lonnymq.message_create('t-1', 'y');
SELECT is(
    (SELECT array_agg(channel ORDER BY channel) FROM lonnymq.message_dequeue(60000, 10)),
    ARRAY['t-1', 't-own', 't-vip-1', 'u'],
    'one message of each channel under the pattern, then nothing more of t-1');
SELECT is(
    (SELECT count(*) FROM lonnymq.message_dequeue(60000, 10)), 0::bigint, 't-1''s second message waits');
SELECT is(
    (SELECT count(*) FROM lonnymq.message WHERE channel = 't-1' AND is_held), 1::bigint, 'held by its admission');
SELECT lonnymq.message_cancel(id) FROM lonnymq.message WHERE channel = 't-1' AND is_held;
SELECT lonnymq.message_complete(id, num_attempts) FROM lonnymq.message WHERE channel IN ('t-1', 't-vip-1');
SELECT is(
    (SELECT count(*) FROM lonnymq.channel WHERE pattern IS NOT NULL), 0::bigint,
    'drained channels under the limited pattern have no rows');

SELECT * FROM finish();
ROLLBACK;
