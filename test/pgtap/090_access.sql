\ir include/setup.psql
SELECT plan(24);

CREATE ROLE lmq_pgtap_app;
CREATE ROLE lmq_pgtap_worker;
CREATE ROLE lmq_pgtap_ops;
CREATE ROLE lmq_pgtap_mon;

SELECT lives_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_app', 'producer') $$, 'grant producer');
SELECT lives_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_app', 'producer') $$, 'granting twice is harmless');
SELECT lives_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_worker', 'consumer') $$, 'grant consumer');
SELECT lives_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_ops', 'admin') $$, 'grant admin');
SELECT lives_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_mon', 'monitor') $$, 'grant monitor');

SELECT ok(
    has_function_privilege('lmq_pgtap_app', 'lonnymq.message_create(text, bytea, bigint, text, jsonb, bigint[], text)', 'EXECUTE')
    AND NOT has_function_privilege('lmq_pgtap_app', 'lonnymq.message_dequeue(bigint, integer, text)', 'EXECUTE')
    AND has_schema_privilege('lmq_pgtap_app', 'lonnymq', 'USAGE'),
    'a producer may create, not dequeue'
);
SELECT ok(
    has_function_privilege('lmq_pgtap_worker', 'lonnymq.message_dequeue(bigint, integer, text)', 'EXECUTE')
    AND has_function_privilege('lmq_pgtap_worker', 'lonnymq.message_complete(bigint, integer)', 'EXECUTE')
    AND NOT has_function_privilege('lmq_pgtap_worker', 'lonnymq.channel_set(text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint, boolean, boolean, text, boolean)', 'EXECUTE')
    AND NOT has_table_privilege('lmq_pgtap_worker', 'lonnymq.message', 'SELECT'),
    'a consumer may work, not set channels or read tables'
);
SELECT ok(
    has_function_privilege('lmq_pgtap_ops', 'lonnymq.channel_drop(text, boolean)', 'EXECUTE')
    AND has_table_privilege('lmq_pgtap_ops', 'lonnymq.message', 'SELECT')
    AND NOT has_table_privilege('lmq_pgtap_ops', 'lonnymq.message', 'DELETE'),
    'an admin may set channels and read, not write, the tables'
);
-- Each set, function by function (0.2.0 added batches, fail, cancel, pause,
-- redrive, schedules, history and tick to the sets below).
CREATE FUNCTION pg_temp.lmq_can(p_role name) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(p.proname, ',' ORDER BY p.proname)
    FROM pg_proc AS p
    WHERE p.pronamespace = 'lonnymq'::regnamespace AND has_function_privilege(p_role, p.oid, 'EXECUTE')
$$;
SELECT is(
    pg_temp.lmq_can('lmq_pgtap_app'),
    'message_create,message_create_batch,message_publish,message_publish_batch,message_status,to_epoch,topic_routes',
    'the producer set'
);
SELECT is(
    pg_temp.lmq_can('lmq_pgtap_worker'),
    'message_complete,message_complete_batch,message_complete_dequeue,message_defer,message_dequeue,message_fail,'
    'message_heartbeat,to_epoch',
    'the consumer set'
);
SELECT is(
    pg_temp.lmq_can('lmq_pgtap_ops'),
    '_metrics,channel_drop,channel_pause,channel_resume,channel_set,channel_stats,dead_letter_delete,dead_letter_redrive,'
    'history_prune,message_cancel,message_complete,message_complete_batch,message_complete_dequeue,message_create,'
    'message_create_batch,message_defer,message_dequeue,message_fail,message_heartbeat,message_publish,'
    'message_publish_batch,message_status,metrics_text,schedule_drop,schedule_set,tick,to_epoch,topic_bind,topic_routes,topic_unbind',
    'the admin set'
);
SELECT is(pg_temp.lmq_can('lmq_pgtap_mon'), '_metrics,message_status,metrics_text,to_epoch', 'the monitor set');
SELECT ok(
    has_table_privilege('lmq_pgtap_mon', 'lonnymq.metrics', 'SELECT')
    AND has_table_privilege('lmq_pgtap_ops', 'lonnymq.metrics', 'SELECT')
    AND NOT has_table_privilege('lmq_pgtap_mon', 'lonnymq.message', 'SELECT')
    AND NOT has_table_privilege('lmq_pgtap_worker', 'lonnymq.metrics', 'SELECT'),
    'a monitor and an admin read the metrics view; a monitor reads no table, a consumer no metrics'
);
SET LOCAL ROLE lmq_pgtap_mon;
SELECT lives_ok($$ SELECT count(*) FROM lonnymq.metrics $$, 'a monitor reads the view');
SELECT lives_ok($$ SELECT lonnymq.metrics_text() $$, 'and the text');
RESET ROLE;
SELECT ok(
    has_table_privilege('lmq_pgtap_ops', 'lonnymq.channel_stats', 'SELECT')
    AND has_table_privilege('lmq_pgtap_ops', 'lonnymq.dead_letter', 'SELECT')
    AND has_table_privilege('lmq_pgtap_ops', 'lonnymq.message_history', 'SELECT')
    AND NOT has_table_privilege('lmq_pgtap_worker', 'lonnymq.channel_stats', 'SELECT'),
    'an admin reads channel_stats, dead letters and history; a consumer does not'
);
SELECT is(
    (SELECT string_agg(role_name || ':' || access, ', ' ORDER BY role_name)
     FROM lonnymq.access_grant WHERE role_name LIKE 'lmq_pgtap%'),
    'lmq_pgtap_app:producer, lmq_pgtap_mon:monitor, lmq_pgtap_ops:admin, lmq_pgtap_worker:consumer',
    'grants are recorded once each'
);

SELECT lonnymq.revoke_access('lmq_pgtap_app', 'producer');
SELECT ok(
    NOT has_function_privilege('lmq_pgtap_app', 'lonnymq.message_create(text, bytea, bigint, text, jsonb, bigint[], text)', 'EXECUTE')
    AND NOT has_schema_privilege('lmq_pgtap_app', 'lonnymq', 'USAGE'),
    'revoking the only set takes the functions and the schema back'
);
SELECT is((SELECT count(*) FROM lonnymq.access_grant WHERE role_name = 'lmq_pgtap_app'), 0::bigint, 'and forgets the grant');
SELECT lonnymq.revoke_access('lmq_pgtap_mon', 'monitor');
SELECT ok(
    NOT has_table_privilege('lmq_pgtap_mon', 'lonnymq.metrics', 'SELECT')
    AND NOT has_function_privilege('lmq_pgtap_mon', 'lonnymq.metrics_text()', 'EXECUTE'),
    'revoking monitor takes the view and the text back'
);

SELECT throws_ok($$ SELECT lonnymq.grant_access(NULL, 'producer') $$, '22004', NULL, 'NULL role: 22004');
SELECT throws_ok($$ SELECT lonnymq.revoke_access('lmq_pgtap_app', NULL) $$, '22004', NULL, 'NULL set: 22004');
SELECT throws_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_app', 'superuser') $$, '22023', NULL, 'unknown set: 22023');
SELECT throws_ok($$ SELECT lonnymq.grant_access('lmq_no_such_role', 'producer') $$, '42704', NULL, 'unknown role: 42704');

SELECT * FROM finish();
ROLLBACK;
