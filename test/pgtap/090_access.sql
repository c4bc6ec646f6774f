\ir include/setup.psql
SELECT plan(14);

CREATE ROLE lmq_pgtap_app;
CREATE ROLE lmq_pgtap_worker;
CREATE ROLE lmq_pgtap_ops;

SELECT lives_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_app', 'producer') $$, 'grant producer');
SELECT lives_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_app', 'producer') $$, 'granting twice is harmless');
SELECT lives_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_worker', 'consumer') $$, 'grant consumer');
SELECT lives_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_ops', 'admin') $$, 'grant admin');

SELECT ok(
    has_function_privilege('lmq_pgtap_app', 'lonnymq.message_create(text, bytea, bigint)', 'EXECUTE')
    AND NOT has_function_privilege('lmq_pgtap_app', 'lonnymq.message_dequeue(bigint, integer, text)', 'EXECUTE')
    AND has_schema_privilege('lmq_pgtap_app', 'lonnymq', 'USAGE'),
    'a producer may create, not dequeue'
);
SELECT ok(
    has_function_privilege('lmq_pgtap_worker', 'lonnymq.message_dequeue(bigint, integer, text)', 'EXECUTE')
    AND has_function_privilege('lmq_pgtap_worker', 'lonnymq.message_complete(bigint, integer)', 'EXECUTE')
    AND NOT has_function_privilege('lmq_pgtap_worker', 'lonnymq.channel_set(text, integer, integer, bigint)', 'EXECUTE')
    AND NOT has_table_privilege('lmq_pgtap_worker', 'lonnymq.message', 'SELECT'),
    'a consumer may work, not set channels or read tables'
);
SELECT ok(
    has_function_privilege('lmq_pgtap_ops', 'lonnymq.channel_drop(text, boolean)', 'EXECUTE')
    AND has_table_privilege('lmq_pgtap_ops', 'lonnymq.message', 'SELECT')
    AND NOT has_table_privilege('lmq_pgtap_ops', 'lonnymq.message', 'DELETE'),
    'an admin may set channels and read, not write, the tables'
);
SELECT is(
    (SELECT string_agg(role_name || ':' || access, ', ' ORDER BY role_name)
     FROM lonnymq.access_grant WHERE role_name LIKE 'lmq_pgtap%'),
    'lmq_pgtap_app:producer, lmq_pgtap_ops:admin, lmq_pgtap_worker:consumer',
    'grants are recorded once each'
);

SELECT lonnymq.revoke_access('lmq_pgtap_app', 'producer');
SELECT ok(
    NOT has_function_privilege('lmq_pgtap_app', 'lonnymq.message_create(text, bytea, bigint)', 'EXECUTE')
    AND NOT has_schema_privilege('lmq_pgtap_app', 'lonnymq', 'USAGE'),
    'revoking the only set takes the functions and the schema back'
);
SELECT is((SELECT count(*) FROM lonnymq.access_grant WHERE role_name = 'lmq_pgtap_app'), 0::bigint, 'and forgets the grant');

SELECT throws_ok($$ SELECT lonnymq.grant_access(NULL, 'producer') $$, '22004', NULL, 'NULL role: 22004');
SELECT throws_ok($$ SELECT lonnymq.revoke_access('lmq_pgtap_app', NULL) $$, '22004', NULL, 'NULL set: 22004');
SELECT throws_ok($$ SELECT lonnymq.grant_access('lmq_pgtap_app', 'superuser') $$, '22023', NULL, 'unknown set: 22023');
SELECT throws_ok($$ SELECT lonnymq.grant_access('lmq_no_such_role', 'producer') $$, '42704', NULL, 'unknown role: 42704');

SELECT * FROM finish();
ROLLBACK;
