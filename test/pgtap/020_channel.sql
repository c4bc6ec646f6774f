\ir include/setup.psql
SELECT plan(22);

-- (test_upgrade runs this file on an upgraded database, whose channels
-- already had limits: then completions follow rows from the start.)
SELECT pg_sequence_last_value('lonnymq.channel_followed_seq') = 0 AS followed_none \gset
SELECT lives_ok($$ SELECT lonnymq.channel_set('c1') $$, 'channel_set creates a channel with defaults');
SELECT lives_ok($$ SELECT lonnymq.channel_set('c0', p_max_attempts => 5, p_dedup_window_ms => 1000, p_notify => TRUE) $$,
    'and one with retries, a dedup window and notify');
SELECT CASE WHEN :'followed_none' THEN is(pg_sequence_last_value('lonnymq.channel_followed_seq'), 0::bigint,
    'neither is anything a completion follows: channel_followed_seq stays 0, completions read no channel row')
    ELSE skip('a database whose channels had limits before') END;
-- So completing c0's messages reads no channel row (channel_pkey is not
-- scanned), until some channel has a limit (below).
CREATE FUNCTION pg_temp.channel_probes_of_a_completion() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_delivery record;
    v_before bigint;
BEGIN
    PERFORM lonnymq.message_create('c0', 'x');
    SELECT d.id, d.num_attempts INTO v_delivery FROM lonnymq.message_dequeue(60000, 1, 'c0') AS d;
    v_before := pg_stat_get_xact_numscans('lonnymq.channel_pkey'::regclass);
    PERFORM lonnymq.message_complete(v_delivery.id, v_delivery.num_attempts);
    RETURN pg_stat_get_xact_numscans('lonnymq.channel_pkey'::regclass) - v_before;
END;
$$;
SELECT CASE WHEN :'followed_none' THEN is(pg_temp.channel_probes_of_a_completion(), 0::bigint,
    'a message of a channel configured with retries only is completed without reading its channel row')
    ELSE skip('a database whose channels had limits before') END;
SELECT results_eq(
    $$ SELECT max_concurrency, max_size, release_interval_ms FROM lonnymq.channel WHERE name = 'c1' $$,
    $$ VALUES (NULL::integer, NULL::integer, 0::bigint) $$,
    'a new channel has no limits'
);
SELECT lives_ok($$ SELECT lonnymq.channel_set('c1', 3, 10, 250) $$, 'channel_set sets limits');
SELECT is(pg_sequence_last_value('lonnymq.channel_followed_seq'), 1::bigint,
    'limits set channel_followed_seq: completions follow channel rows from then on');
SELECT cmp_ok(pg_temp.channel_probes_of_a_completion(), '>', 0::bigint,
    'and then a completion of c0''s message reads its channel row (whether it has a limit or keeps history)');
SELECT lonnymq.channel_drop('c0');
SELECT results_eq(
    $$ SELECT max_concurrency, max_size, release_interval_ms FROM lonnymq.channel WHERE name = 'c1' $$,
    $$ VALUES (3, 10, 250::bigint) $$,
    'limits are stored'
);
SELECT lives_ok($$ SELECT lonnymq.channel_set('c1', p_max_size => 5) $$, 'named arguments work');
SELECT results_eq(
    $$ SELECT max_concurrency, max_size, release_interval_ms FROM lonnymq.channel WHERE name = 'c1' $$,
    $$ VALUES (NULL::integer, 5, 0::bigint) $$,
    'channel_set replaces every limit (omitted ones become their defaults)'
);
SELECT is((SELECT count(*) FROM lonnymq.channel WHERE name = 'c1'), 1::bigint, 'setting twice keeps one channel');

-- max_size set on a channel that already holds messages counts them.
SELECT lonnymq.message_create('c2', 'x') FROM generate_series(1, 4);
SELECT lonnymq.channel_set('c2', p_max_size => 5);
SELECT isnt(lonnymq.message_create('c2', 'fifth'), NULL, 'a channel holding 4 of 5 accepts one more');
SELECT is(lonnymq.message_create('c2', 'sixth'), NULL, 'and then reports the next message dropped');

-- channel_drop
SELECT is(lonnymq.channel_drop('nope'), FALSE, 'dropping an unknown channel returns false');
SELECT is(lonnymq.channel_drop('c1'), TRUE, 'dropping an empty channel returns true');
SELECT is((SELECT count(*) FROM lonnymq.channel WHERE name = 'c1'), 0::bigint, 'the channel is gone');
SELECT throws_ok($$ SELECT lonnymq.channel_drop('c2') $$, '55006', NULL, 'dropping a channel holding messages raises 55006');
SELECT is(pg_temp.lmq_count('c2'), 5::bigint, 'and keeps its messages');
SELECT lonnymq.message_dequeue(60000, 1, 'c2');
SELECT is(lonnymq.channel_drop('c2', TRUE), TRUE, 'p_purge drops a channel with messages, locked ones included');
-- 0.11.0: no wake-up rows exist any more; what a dropped channel could
-- leave behind is its messages, its configuration row, its quota row and its
-- deduplication keys.
SELECT is((SELECT count(*) FROM lonnymq.message) + (SELECT count(*) FROM lonnymq.channel)
    + (SELECT count(*) FROM lonnymq.channel_quota) + (SELECT count(*) FROM lonnymq.message_key),
    0::bigint, 'purge leaves no messages, channel, quota or key rows behind');
SELECT is(pg_sequence_last_value('lonnymq.channel_followed_seq'), 1::bigint,
    'channel_followed_seq stays 1 when the rows are gone (it only tells when probes can be skipped)');

SELECT * FROM finish();
ROLLBACK;
