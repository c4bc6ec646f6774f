\ir include/setup.psql
SELECT plan(50);

-- The public API of 0.2.0: names and parameter order are a contract.
SELECT has_function('lonnymq', 'to_epoch', ARRAY['timestamp with time zone'], 'to_epoch(timestamp with time zone)');
SELECT has_function('lonnymq', 'channel_set', ARRAY['text', 'integer', 'integer', 'bigint', 'integer', 'bigint', 'double precision', 'bigint', 'double precision', 'bigint', 'boolean', 'boolean', 'text', 'boolean'], 'channel_set(text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint, boolean, boolean, text, boolean)');
SELECT has_function('lonnymq', 'channel_drop', ARRAY['text', 'boolean'], 'channel_drop(text, boolean)');
SELECT has_function('lonnymq', 'channel_pause', ARRAY['text'], 'channel_pause(text)');
SELECT has_function('lonnymq', 'channel_resume', ARRAY['text'], 'channel_resume(text)');
SELECT has_function('lonnymq', 'message_create', ARRAY['text', 'bytea', 'bigint', 'text', 'jsonb', 'bigint[]', 'text'], 'message_create(text, bytea, bigint, text, jsonb, bigint[], text)');
SELECT has_function('lonnymq', 'message_create_batch', ARRAY['text', 'bytea[]', 'bigint[]', 'text[]', 'jsonb[]', 'bigint[]', 'text'], 'message_create_batch(text, bytea[], bigint[], text[], jsonb[], bigint[], text)');
SELECT has_function('lonnymq', 'message_dequeue', ARRAY['bigint', 'integer', 'text'], 'message_dequeue(bigint, integer, text)');
SELECT has_function('lonnymq', 'message_complete_dequeue', ARRAY['bigint[]', 'integer[]', 'bigint', 'integer', 'text'], 'message_complete_dequeue(bigint[], integer[], bigint, integer, text)');
SELECT has_function('lonnymq', 'message_complete', ARRAY['bigint', 'integer'], 'message_complete(bigint, integer)');
SELECT has_function('lonnymq', 'message_complete_batch', ARRAY['bigint[]', 'integer[]'], 'message_complete_batch(bigint[], integer[])');
SELECT has_function('lonnymq', 'message_defer', ARRAY['bigint', 'integer', 'bigint', 'bytea'], 'message_defer(bigint, integer, bigint, bytea)');
SELECT has_function('lonnymq', 'message_heartbeat', ARRAY['bigint', 'integer', 'bigint'], 'message_heartbeat(bigint, integer, bigint)');
SELECT has_function('lonnymq', 'message_fail', ARRAY['bigint', 'integer', 'text'], 'message_fail(bigint, integer, text)');
SELECT has_function('lonnymq', 'message_cancel', ARRAY['bigint'], 'message_cancel(bigint)');
SELECT has_function('lonnymq', 'dead_letter_redrive', ARRAY['text', 'bigint[]'], 'dead_letter_redrive(text, bigint[])');
SELECT has_function('lonnymq', 'dead_letter_delete', ARRAY['text', 'bigint[]', 'boolean'], 'dead_letter_delete(text, bigint[], boolean)');
SELECT has_function('lonnymq', 'history_prune', ARRAY['bigint'], 'history_prune(bigint)');
SELECT has_function('lonnymq', 'schedule_set', ARRAY['text', 'text', 'bytea', 'bigint', 'bigint'], 'schedule_set(text, text, bytea, bigint, bigint)');
SELECT has_function('lonnymq', 'schedule_drop', ARRAY['text'], 'schedule_drop(text)');
SELECT has_function('lonnymq', 'tick', ARRAY[]::text[], 'tick()');
SELECT has_function('lonnymq', 'grant_access', ARRAY['name', 'text'], 'grant_access(name, text)');
SELECT has_function('lonnymq', 'revoke_access', ARRAY['name', 'text'], 'revoke_access(name, text)');
-- Topics (0.12.0).
SELECT has_function('lonnymq', 'topic_bind', ARRAY['text', 'text'], 'topic_bind(text, text)');
SELECT has_function('lonnymq', 'topic_unbind', ARRAY['text', 'text'], 'topic_unbind(text, text)');
SELECT has_function('lonnymq', 'topic_routes', ARRAY['text'], 'topic_routes(text)');
SELECT has_function('lonnymq', 'message_publish', ARRAY['text', 'bytea', 'bigint', 'text', 'boolean', 'jsonb', 'bigint[]', 'text'], 'message_publish(text, bytea, bigint, text, boolean, jsonb, bigint[], text)');
SELECT has_function('lonnymq', 'message_publish_batch', ARRAY['text', 'bytea[]', 'bigint[]', 'text[]', 'boolean', 'jsonb[]', 'bigint[]', 'text'], 'message_publish_batch(text, bytea[], bigint[], text[], boolean, jsonb[], bigint[], text)');
SELECT is(
    (SELECT pg_get_function_result('lonnymq.message_dequeue(bigint, integer, text)'::regprocedure)),
    'SETOF lonnymq.delivery',
    'message_dequeue returns lonnymq.delivery rows'
);
SELECT is(
    (SELECT pg_get_function_result(
        'lonnymq.message_complete_dequeue(bigint[], integer[], bigint, integer, text)'::regprocedure
    )),
    'SETOF lonnymq.delivery',
    'message_complete_dequeue returns lonnymq.delivery rows'
);
SELECT is(
    (SELECT array_agg(format('%s %s', a.attname, format_type(a.atttypid, a.atttypmod)) ORDER BY a.attnum)
     FROM pg_attribute AS a WHERE a.attrelid = 'lonnymq.delivery'::regclass AND a.attnum > 0),
    ARRAY['id bigint', 'channel text', 'content bytea', 'state bytea', 'num_attempts integer', 'dequeue_at bigint',
          'is_recovered boolean', 'headers jsonb'],
    'a delivery has the documented columns'
);

-- Standards every function meets.
SELECT is(
    (SELECT string_agg(p.oid::regprocedure::text, ', ')
     FROM pg_proc AS p
     WHERE p.pronamespace = 'lonnymq'::regnamespace AND p.prosecdef
       AND NOT coalesce('search_path=pg_catalog, pg_temp' = any(p.proconfig), FALSE)),
    NULL,
    'every SECURITY DEFINER function pins search_path = pg_catalog, pg_temp'
);
SELECT is(
    (SELECT string_agg(p.oid::regprocedure::text, ', ')
     FROM pg_proc AS p
     WHERE p.pronamespace = 'lonnymq'::regnamespace AND p.proname NOT LIKE '\_%'
       AND p.proname NOT IN ('to_epoch', 'grant_access', 'revoke_access')
       AND NOT p.prosecdef),
    NULL,
    'every public function that touches the queue is SECURITY DEFINER'
);
SELECT is(
    (SELECT string_agg(p.oid::regprocedure::text, ', ')
     FROM pg_proc AS p
     WHERE p.pronamespace = 'lonnymq'::regnamespace AND p.proname IN ('grant_access', 'revoke_access', '_access_apply')
       AND (p.prosecdef OR NOT coalesce('search_path=pg_catalog, pg_temp' = any(p.proconfig), FALSE))),
    NULL,
    'the grant functions run with the caller''s rights, on a pinned search_path'
);
-- Dynamic SQL only through format() with quoted identifiers.
SELECT is(
    (SELECT string_agg(p.proname || ': ' || trim(l.line), E'\n')
     FROM pg_proc AS p, regexp_split_to_table(p.prosrc, E'\n') AS l (line)
     WHERE p.pronamespace = 'lonnymq'::regnamespace
       AND l.line ~* '\mEXECUTE\M' AND l.line !~ 'EXECUTE pg_catalog\.format\(''[^'']*'''),
    NULL,
    'every EXECUTE builds its statement with format() from a literal template'
);
SELECT is(
    (SELECT string_agg(p.proname || ': ' || trim(l.line), E'\n')
     FROM pg_proc AS p, regexp_split_to_table(p.prosrc, E'\n') AS l (line)
     WHERE p.pronamespace = 'lonnymq'::regnamespace
       AND l.line ~ 'EXECUTE pg_catalog\.format' AND l.line ~ '%L|%%'),
    NULL,
    'and interpolates only identifiers (%I) and regprocedure values (%s)'
);
SELECT is(
    (SELECT string_agg(p.oid::regprocedure::text, ', ')
     FROM pg_proc AS p
     WHERE p.pronamespace = 'lonnymq'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL),
    NULL,
    'every function has a COMMENT'
);
SELECT is(
    (SELECT string_agg(p.oid::regprocedure::text, ', ')
     FROM pg_proc AS p
     WHERE p.pronamespace = 'lonnymq'::regnamespace
       AND has_function_privilege('public', p.oid, 'EXECUTE')),
    NULL,
    'no function is executable by PUBLIC (to_epoch neither, since 0.13.1)'
);
SELECT is(
    (SELECT string_agg(c.relname, ', ')
     FROM pg_class AS c
     WHERE c.relnamespace = 'lonnymq'::regnamespace AND c.relkind IN ('r', 'S')
       AND (has_table_privilege('public', c.oid, 'SELECT') OR has_table_privilege('public', c.oid, 'INSERT'))),
    NULL,
    'no table or sequence is readable or writable by PUBLIC'
);

-- Dump and restore: every table and sequence holding user data is
-- registered with pg_extension_config_dump.
SELECT set_eq(
    $$ SELECT unnest(extconfig)::regclass::text FROM pg_extension WHERE extname = 'lonnymq' $$,
    $$ SELECT c.oid::regclass::text FROM pg_class AS c
       WHERE c.relnamespace = 'lonnymq'::regnamespace AND c.relkind IN ('r', 'S')
         -- (Transaction ids of the dumping cluster: 0 after a restore.)
         AND c.oid NOT IN ('lonnymq.epoch_raiser_seq'::regclass, 'lonnymq.schedule_changer_seq'::regclass) $$,
    'every lonnymq table and sequence is registered for pg_dump, but epoch_raiser_seq and schedule_changer_seq'
);
SELECT is(
    (SELECT extrelocatable FROM pg_extension WHERE extname = 'lonnymq'),
    FALSE,
    'the extension is not relocatable'
);
SELECT is(
    (SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'lonnymq'),
    'lonnymq',
    'it lives in schema lonnymq'
);
SELECT is(
    (SELECT string_agg(c.relname, ', ')
     FROM pg_class AS c
     WHERE c.relnamespace = 'lonnymq'::regnamespace AND c.relkind = 'r'
       AND NOT EXISTS (SELECT 1 FROM unnest(c.reloptions) AS o WHERE o LIKE 'autovacuum_vacuum_threshold=%')),
    NULL,
    'every table sets its autovacuum threshold on purpose'
);

-- The parameter names are part of the API: channel_set is called with named
-- trailing arguments (channel_set('c', p_max_attempts => 3)).
SELECT is(
    (SELECT array_to_string(proargnames, ',') FROM pg_proc
     WHERE oid = 'lonnymq.channel_set(text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint, boolean, boolean, text, boolean)'::regprocedure),
    'p_channel,p_max_concurrency,p_max_size,p_release_interval_ms,p_max_attempts,p_backoff_base_ms,p_backoff_factor,p_backoff_max_ms,p_backoff_jitter,p_dedup_window_ms,p_retain_history,p_notify,p_notify_payload,p_ordered',
    'channel_set parameter names'
);
SELECT has_view('lonnymq', 'channel_stats', 'the channel_stats view');
SELECT columns_are('lonnymq', 'channel_stats', ARRAY[
    'channel', 'ready', 'scheduled', 'locked', 'dead', 'oldest_ready_age_ms', 'is_paused',
    'max_concurrency', 'max_size', 'release_interval_ms', 'max_attempts', 'backoff_base_ms',
    'backoff_factor', 'backoff_max_ms', 'backoff_jitter', 'dedup_window_ms', 'retain_history', 'notify',
    'is_ordered', 'pattern', 'waiting'
], 'channel_stats has the documented columns');
SELECT has_view('lonnymq', 'metrics', 'the metrics view');
SELECT columns_are('lonnymq', 'metrics', ARRAY['metric', 'channel', 'state', 'value'], 'metrics has the documented columns');
SELECT function_returns('lonnymq', 'metrics_text', ARRAY[]::text[], 'text', 'metrics_text() returns text');
SELECT is(
    (SELECT string_agg(c.relname, ', ' ORDER BY c.relname)
     FROM pg_class AS c
     WHERE c.relnamespace = 'lonnymq'::regnamespace AND c.relkind = 'S' AND c.relname LIKE '%\_seq'
       AND c.relname IN ('messages_created_seq', 'messages_delivered_seq', 'messages_completed_seq',
                         'messages_failed_seq', 'messages_dead_lettered_seq', 'messages_lock_expired_seq')),
    'messages_completed_seq, messages_created_seq, messages_dead_lettered_seq, messages_delivered_seq, messages_failed_seq, messages_lock_expired_seq',
    'the metrics counters are sequences'
);

SELECT * FROM finish();
ROLLBACK;
