\ir include/setup.psql
-- retain_history and history_prune, the channel_stats view, the notify flag.
SELECT plan(34);

-- ---------------------------------------------------------------- history
SELECT lonnymq.channel_set('hist', p_retain_history => TRUE);
SELECT lonnymq.message_create('hist', 'payload', NULL, 'hk') AS h_id \gset
SELECT lonnymq.message_create('nohist', 'other') AS o_id \gset
SELECT lonnymq.message_defer(d.id, d.num_attempts, NULL, 'st') FROM lonnymq.message_dequeue(60000, 1, 'hist') AS d;
SELECT created_at AS h_created FROM lonnymq.message WHERE id = :h_id \gset
SELECT pg_temp.lmq_now() AS before_complete \gset
SELECT ok(lonnymq.message_complete(d.id, d.num_attempts), 'complete the second attempt')
FROM lonnymq.message_dequeue(60000, 1, 'hist') AS d;
SELECT pg_temp.lmq_now() AS after_complete \gset
SELECT ok(lonnymq.message_complete(d.id, d.num_attempts), 'complete a message of a channel without history')
FROM lonnymq.message_dequeue(60000, 1, 'nohist') AS d;
SELECT is(
    (SELECT concat_ws(' ', h.id = :h_id, h.channel, h.key, convert_from(h.content, 'UTF8'), convert_from(h.state, 'UTF8'), h.num_attempts, h.created_at = :h_created)
     FROM lonnymq.message_history AS h),
    't hist hk payload st 2 t',
    'retain_history: the completed message is copied with its channel, key, content, state, attempts and created_at'
);
SELECT ok(
    (SELECT completed_at BETWEEN :before_complete AND :after_complete FROM lonnymq.message_history WHERE id = :h_id),
    'completed_at is the time of the complete'
);
SELECT is((SELECT count(*) FROM lonnymq.message_history WHERE id = :o_id OR channel = 'nohist'), 0::bigint,
    'a channel without retain_history keeps no copy');
SELECT is((SELECT count(*) FROM lonnymq.message WHERE id IN (:h_id, :o_id)), 0::bigint, 'both messages are gone from the queue');
SELECT lonnymq.channel_drop('hist');
SELECT is((SELECT count(*) FROM lonnymq.message_history WHERE channel = 'hist'), 1::bigint, 'history outlives channel_drop');

-- history_prune: only rows old enough.
SELECT lonnymq.channel_set('hist', p_retain_history => TRUE);
SELECT count(*) FROM lonnymq.message_create_batch('hist', array_fill('x'::bytea, ARRAY[5]));
SELECT lonnymq.message_complete_batch(array_agg(d.id), array_agg(d.num_attempts)) FROM lonnymq.message_dequeue(60000, 5, 'hist') AS d;
SELECT is((SELECT count(*) FROM lonnymq.message_history), 6::bigint, 'six history rows');
-- Age three of them by hand: 10 s, 20 s and 30 s.
UPDATE lonnymq.message_history AS h SET completed_at = pg_temp.lmq_now() - a.age
FROM (SELECT id, 10000 * row_number() OVER (ORDER BY id) AS age FROM lonnymq.message_history ORDER BY id LIMIT 3) AS a
WHERE h.id = a.id;
SELECT is(lonnymq.history_prune(60000), 0::bigint, 'nothing is older than 60 s');
SELECT is(lonnymq.history_prune(15000), 2::bigint, 'two rows are older than 15 s');
SELECT is((SELECT count(*) FROM lonnymq.message_history WHERE completed_at <= pg_temp.lmq_now() - 15000), 0::bigint, 'they are gone');
SELECT is((SELECT count(*) FROM lonnymq.message_history), 4::bigint, 'the others stay');
SELECT is(lonnymq.history_prune(5000), 1::bigint, 'one more is older than 5 s');
SELECT is(lonnymq.history_prune(0), 3::bigint, 'history_prune(0) deletes the rest');
SELECT is((SELECT count(*) FROM lonnymq.message_history), 0::bigint, 'history is empty');
SELECT throws_ok($$ SELECT lonnymq.history_prune(NULL) $$, '22004', NULL, 'history_prune(NULL): 22004');
SELECT throws_ok($$ SELECT lonnymq.history_prune(-1) $$, '22023', NULL, 'history_prune(-1): 22023');

-- ---------------------------------------------------------------- channel_stats
-- One channel with a message in each state: dead, locked, expired lock, 2 ready, 1 future.
SELECT lonnymq.channel_set('st', p_max_concurrency => 5, p_max_size => 10, p_release_interval_ms => 0, p_max_attempts => 1);
SELECT lonnymq.message_create('st', 'dead'), lonnymq.message_create('st', 'locked'), lonnymq.message_create('st', 'expired');
SELECT lonnymq.message_fail(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'st') AS d;
SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'st');
SELECT count(*) FROM lonnymq.message_dequeue(1, 1, 'st');
SELECT pg_sleep(0.005);
SELECT lonnymq.message_create('st', 'ready1') AS r1, lonnymq.message_create('st', 'ready2') AS r2 \gset
SELECT lonnymq.message_create('st', 'future', pg_temp.lmq_now() + 3600000);
-- ready1 has been ready for 4 s (created 5 s ago, due 4 s ago).
SELECT pg_temp.lmq_now() AS t_set \gset
UPDATE lonnymq.message SET created_at = :t_set - 5000, dequeue_at = :t_set - 4000 WHERE id = :r1;
SELECT is(
    (SELECT concat_ws(' ', ready, scheduled, locked, dead) FROM lonnymq.channel_stats WHERE channel = 'st'),
    '2 1 2 1',
    'ready 2, scheduled 1, locked 2 (the expired lock included), dead 1'
);
SELECT ok(
    (SELECT oldest_ready_age_ms BETWEEN 4000 AND pg_temp.lmq_now() - :t_set + 4000 FROM lonnymq.channel_stats WHERE channel = 'st'),
    'oldest_ready_age_ms: how long the next message has been deliverable'
);
SELECT is(
    (SELECT concat_ws(' ', is_paused, max_concurrency, max_size, release_interval_ms, max_attempts, backoff_base_ms, dedup_window_ms, retain_history, notify)
     FROM lonnymq.channel_stats WHERE channel = 'st'),
    'f 5 10 0 1 1000 0 f f',
    'the pause state and the configuration'
);
UPDATE lonnymq.message SET created_at = :t_set - 1000, dequeue_at = :t_set - 9000 WHERE id = :r2;
SELECT ok(
    (SELECT oldest_ready_age_ms BETWEEN 1000 AND pg_temp.lmq_now() - :t_set + 1000 FROM lonnymq.channel_stats WHERE channel = 'st'),
    'a message due before it was created counts from its creation'
);
-- channel_stats(name): the view's row of that channel, nothing for a
-- channel with neither configuration nor messages.
SELECT is(
    (SELECT concat_ws(' ', channel, ready, scheduled, locked, dead, is_paused, max_concurrency, max_size)
     FROM lonnymq.channel_stats('st')),
    (SELECT concat_ws(' ', channel, ready, scheduled, locked, dead, is_paused, max_concurrency, max_size)
     FROM lonnymq.channel_stats WHERE channel = 'st'),
    'channel_stats(name) is the view''s row of that channel'
);
SELECT is((SELECT count(*) FROM lonnymq.channel_stats('no such channel')), 0::bigint,
    'channel_stats(name): no row for a channel without configuration or messages');
SELECT is((SELECT count(*) FROM lonnymq.channel_stats(NULL)), 0::bigint, 'channel_stats(NULL): no row');
SELECT lonnymq.channel_pause('st');
SELECT is((SELECT is_paused FROM lonnymq.channel_stats WHERE channel = 'st'), TRUE, 'is_paused');
SELECT lonnymq.channel_set('empty');
SELECT is(
    (SELECT concat_ws(' ', ready, scheduled, locked, dead, coalesce(oldest_ready_age_ms::text, 'NULL'), is_paused, coalesce(max_concurrency, -1))
     FROM lonnymq.channel_stats WHERE channel = 'empty'),
    '0 0 0 0 NULL f -1',
    'an empty channel: zeros, no age'
);
SELECT is((SELECT count(*) FROM lonnymq.channel_stats), (SELECT count(*) FROM lonnymq.channel), 'one row per channel');

-- ---------------------------------------------------------------- notify
-- Notifications are only sent at commit, which this transaction never does:
-- their delivery is tested from Python.  Here: the flag, and every call that
-- notifies works on such a channel.
SELECT lonnymq.channel_set('n', p_notify => TRUE, p_backoff_base_ms => 0);
SELECT is((SELECT notify FROM lonnymq.channel_stats WHERE channel = 'n'), TRUE, 'p_notify is stored');
SELECT lives_ok($$ SELECT lonnymq.message_create('n', 'a') $$, 'message_create on a notify channel');
SELECT lives_ok($$ SELECT lonnymq.message_create_batch('n', ARRAY['b', 'c']::bytea[]) $$, 'message_create_batch');
SELECT lives_ok(
    $$ SELECT lonnymq.message_defer(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'n') AS d $$,
    'message_defer to now'
);
SELECT lives_ok(
    $$ SELECT lonnymq.message_fail(d.id, d.num_attempts, 'x') FROM lonnymq.message_dequeue(60000, 1, 'n') AS d $$,
    'message_fail with no backoff'
);
SELECT lives_ok($$ SELECT lonnymq.channel_pause('n'), lonnymq.channel_resume('n') $$, 'channel_resume');
SELECT is(pg_temp.lmq_take_all(10), ARRAY['n:c', 'n:a', 'n:b'], 'the channel works as any other');

SELECT * FROM finish();
ROLLBACK;
