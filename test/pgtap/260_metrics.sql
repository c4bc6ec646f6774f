\ir include/setup.psql
-- Metrics (the view metrics, metrics_text(); 0.12.0).  The bounded reads,
-- expired locks and the scrape by Debian's prometheus-postgres-exporter are
-- in test/python/test_metrics.py.  Counters are sequences, which a
-- ROLLBACK does not undo: this file compares them with their values at its
-- start.
SELECT plan(17);

CREATE TEMP TABLE lmq_before AS SELECT metric, value FROM lonnymq.metrics WHERE metric LIKE '%\_total';
CREATE FUNCTION pg_temp.lmq_delta(p_metric text) RETURNS double precision LANGUAGE sql AS $$
    SELECT m.value - b.value FROM lonnymq.metrics AS m JOIN lmq_before AS b USING (metric) WHERE m.metric = p_metric
$$;
CREATE FUNCTION pg_temp.lmq_gauge(p_metric text, p_channel text, p_state text DEFAULT NULL)
RETURNS double precision LANGUAGE sql AS $$
    SELECT m.value FROM lonnymq.metrics AS m
    WHERE m.metric = p_metric AND m.channel = p_channel AND m.state IS NOT DISTINCT FROM p_state
$$;

-- ---------------------------------------------------------------- a known workload
SELECT lonnymq.channel_set('m-orders', p_max_attempts => 1);
SELECT lonnymq.channel_set('m-tenant-*', p_max_concurrency => 2);
SELECT lonnymq.channel_set('m-q"\x');
SELECT lonnymq.message_create('m-orders', 'a'), lonnymq.message_create('m-orders', 'b'),
    lonnymq.message_create('m-orders', 'c');
SELECT lonnymq.message_create('m-tenant-1', 'later', lonnymq.to_epoch(now()) + 3600000);
SELECT count(*) FROM lonnymq.message_create_batch('m-tenant-2', ARRAY['x', 'y']::bytea[]);
CREATE TEMP TABLE lmq_taken AS SELECT * FROM lonnymq.message_dequeue(30000, 2, 'm-orders');
SELECT lonnymq.message_complete(id, num_attempts) FROM lmq_taken ORDER BY id LIMIT 1;
SELECT lonnymq.message_fail(id, num_attempts, 'boom') FROM lmq_taken ORDER BY id DESC LIMIT 1;

SELECT is(pg_temp.lmq_gauge('lonnymq_messages', 'm-orders', 'ready'), 1::double precision, 'a configured channel: 1 ready');
SELECT is(pg_temp.lmq_gauge('lonnymq_messages', 'm-orders', 'locked'), 0::double precision, 'none locked');
SELECT is(pg_temp.lmq_gauge('lonnymq_dead_letters', 'm-orders'), 1::double precision, 'one dead letter (max_attempts 1)');
SELECT is(
    pg_temp.lmq_gauge('lonnymq_messages', 'm-tenant-*', 'scheduled')
    || '/' || pg_temp.lmq_gauge('lonnymq_messages', 'm-tenant-*', 'ready'),
    '1/2',
    'a pattern''s series counts its followers: 1 scheduled, 2 ready'
);
SELECT is(pg_temp.lmq_gauge('lonnymq_messages', 'm-q"\x', 'ready'), 0::double precision, 'a configured channel without messages has its series');
SELECT ok(pg_temp.lmq_gauge('lonnymq_oldest_ready_age_seconds', 'm-orders') >= 0, 'the age of the next ready message');
SELECT is(
    (SELECT string_agg(m.metric || '=' || pg_temp.lmq_delta(m.metric), ',' ORDER BY m.metric)
     FROM lmq_before AS m),
    'lonnymq_messages_completed_total=1,lonnymq_messages_created_total=6,lonnymq_messages_dead_lettered_total=1,'
    'lonnymq_messages_delivered_total=2,lonnymq_messages_failed_total=1,lonnymq_messages_lock_expired_total=0',
    'the counters moved by the workload''s events'
);

-- ---------------------------------------------------------------- the text format
SELECT matches(
    lonnymq.metrics_text(),
    E'# HELP lonnymq_messages [^\n]+\n# TYPE lonnymq_messages gauge\n',
    'HELP and TYPE lines'
);
SELECT ok(
    position(E'\nlonnymq_messages{channel="m-orders",state="ready"} 1\n' IN lonnymq.metrics_text()) > 0,
    'a gauge''s line, with its labels'
);
SELECT ok(
    position(E'\n# TYPE lonnymq_messages_created_total counter\nlonnymq_messages_created_total ' IN lonnymq.metrics_text()) > 0,
    'a counter, ending in _total, without labels'
);
SELECT ok(
    position(E'\nlonnymq_dead_letters{channel="m-q\\"\\\\x"} 0\n' IN lonnymq.metrics_text()) > 0,
    'label values escaped (double quote, backslash)'
);
SELECT is(
    (SELECT count(*) FROM regexp_split_to_table(lonnymq.metrics_text(), E'\n') AS l (line)
     WHERE l.line LIKE '# TYPE %'),
    10::bigint,
    'ten metric families'
);

-- ---------------------------------------------------------------- the count limit
SELECT set_config('lonnymq.metrics_count_limit', '2', TRUE);
SELECT is(
    (SELECT sum(m.value) FROM lonnymq.metrics AS m WHERE m.metric = 'lonnymq_messages' AND m.channel = 'm-tenant-*'),
    2::double precision,
    'a series counts up to lonnymq.metrics_count_limit'
);
SELECT is(
    (SELECT m.value FROM lonnymq.metrics AS m WHERE m.metric = 'lonnymq_messages_count_limit'),
    2::double precision,
    'and says so'
);
SELECT set_config('lonnymq.metrics_count_limit', 'many', TRUE);
SELECT throws_ok($$SELECT count(*) FROM lonnymq.metrics$$, '22P02', NULL, 'a limit that is not a number: 22P02');
SELECT set_config('lonnymq.metrics_count_limit', '-1', TRUE);
SELECT throws_ok($$SELECT lonnymq.metrics_text()$$, '2201W', NULL, 'a negative limit: 2201W');
SELECT set_config('lonnymq.metrics_count_limit', '', TRUE);
SELECT lives_ok($$SELECT lonnymq.metrics_text()$$, 'the default again');

SELECT * FROM finish();
ROLLBACK;
