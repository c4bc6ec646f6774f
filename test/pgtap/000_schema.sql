\ir include/setup.psql
SELECT plan(23);

-- The public API of 0.1.0: names and parameter order are a contract.
SELECT has_function('lonnymq', 'to_epoch', ARRAY['timestamp with time zone'], 'to_epoch(timestamptz)');
SELECT has_function('lonnymq', 'channel_set', ARRAY['text', 'integer', 'integer', 'bigint'], 'channel_set(text, integer, integer, bigint)');
SELECT has_function('lonnymq', 'channel_drop', ARRAY['text', 'boolean'], 'channel_drop(text, boolean)');
SELECT has_function('lonnymq', 'message_create', ARRAY['text', 'bytea', 'bigint'], 'message_create(text, bytea, bigint)');
SELECT has_function('lonnymq', 'message_dequeue', ARRAY['bigint', 'integer', 'text'], 'message_dequeue(bigint, integer, text)');
SELECT has_function('lonnymq', 'message_complete', ARRAY['bigint', 'integer'], 'message_complete(bigint, integer)');
SELECT has_function('lonnymq', 'message_defer', ARRAY['bigint', 'integer', 'bigint', 'bytea'], 'message_defer(bigint, integer, bigint, bytea)');
SELECT has_function('lonnymq', 'message_heartbeat', ARRAY['bigint', 'integer', 'bigint'], 'message_heartbeat(bigint, integer, bigint)');
SELECT has_function('lonnymq', 'grant_access', ARRAY['name', 'text'], 'grant_access(name, text)');
SELECT has_function('lonnymq', 'revoke_access', ARRAY['name', 'text'], 'revoke_access(name, text)');
SELECT is(
    (SELECT pg_get_function_result('lonnymq.message_dequeue(bigint, integer, text)'::regprocedure)),
    'TABLE(id bigint, channel text, content bytea, state bytea, num_attempts integer, dequeue_at bigint, is_recovered boolean)',
    'message_dequeue returns the documented columns'
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
     WHERE p.pronamespace = 'lonnymq'::regnamespace AND p.proname <> 'to_epoch'
       AND has_function_privilege('public', p.oid, 'EXECUTE')),
    NULL,
    'no function but to_epoch is executable by PUBLIC'
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
       WHERE c.relnamespace = 'lonnymq'::regnamespace AND c.relkind IN ('r', 'S') $$,
    'every lonnymq table and sequence is registered for pg_dump'
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

SELECT * FROM finish();
ROLLBACK;
