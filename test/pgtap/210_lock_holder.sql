\ir include/setup.psql
-- A lock is held by the role that dequeued the message (0.9.0): complete,
-- complete_batch, defer, fail and heartbeat from another role change
-- nothing and answer as for a stale token.  The token (num_attempts) is a
-- small number that anyone can guess.  Roles act through SET ROLE here;
-- pgTAP's own temp tables are the superuser's, so each call's result is
-- kept in a psql variable and asserted after RESET ROLE.
SELECT plan(16);

CREATE ROLE lmq_pgtap_lock_a;
CREATE ROLE lmq_pgtap_lock_b;
SELECT lonnymq.grant_access('lmq_pgtap_lock_a', 'consumer');
SELECT lonnymq.grant_access('lmq_pgtap_lock_b', 'consumer');
SELECT count(*) FROM lonnymq.message_create_batch('held', array_fill('m'::bytea, ARRAY[6]));

SET ROLE lmq_pgtap_lock_a;
SELECT array_agg(d.id ORDER BY d.id) AS ids, array_agg(d.num_attempts ORDER BY d.id) AS tokens
FROM lonnymq.message_dequeue(600000, 6, 'held') AS d \gset
RESET ROLE;
SELECT is(cardinality(:'ids'::bigint[]), 6, 'role a holds six locks');
SELECT is(
    (SELECT array_agg(DISTINCT m.locked_by::text) FROM lonnymq.message AS m WHERE m.id = any(:'ids'::bigint[])),
    ARRAY['lmq_pgtap_lock_a'], 'each lock records its holder');
SELECT pg_temp.lmq_snapshot() AS before \gset

-- Another role with the right tokens.
SET ROLE lmq_pgtap_lock_b;
SELECT lonnymq.message_complete((:'ids'::bigint[])[1], (:'tokens'::integer[])[1]) AS b_complete \gset
SELECT lonnymq.message_defer((:'ids'::bigint[])[2], (:'tokens'::integer[])[2]) AS b_defer \gset
SELECT lonnymq.message_heartbeat((:'ids'::bigint[])[3], (:'tokens'::integer[])[3], 600000) AS b_heartbeat \gset
SELECT lonnymq.message_fail((:'ids'::bigint[])[4], (:'tokens'::integer[])[4], 'not mine') IS NULL AS b_fail_null \gset
SELECT lonnymq.message_complete_batch(:'ids'::bigint[], :'tokens'::integer[]) AS b_batch \gset
RESET ROLE;
SELECT is(:'b_complete'::text, 'f', 'another role''s complete returns false');
SELECT is(:'b_batch'::text, '0', 'another role''s complete_batch completes none');
SELECT is(:'b_defer'::text, 'f', 'another role''s defer returns false');
SELECT is(:'b_heartbeat'::text, 'f', 'another role''s heartbeat returns false');
SELECT is(:'b_fail_null'::text, 't', 'another role''s fail returns NULL');
SELECT is(pg_temp.lmq_snapshot(), :'before', 'and nothing changed');

-- Nor may a superuser settle a worker's lock.
SELECT is(lonnymq.message_complete((:'ids'::bigint[])[1], (:'tokens'::integer[])[1]), FALSE,
    'a superuser''s complete returns false too');

-- The holder may.
SET ROLE lmq_pgtap_lock_a;
SELECT lonnymq.message_complete((:'ids'::bigint[])[1], (:'tokens'::integer[])[1]) AS a_complete \gset
SELECT lonnymq.message_defer((:'ids'::bigint[])[2], (:'tokens'::integer[])[2]) AS a_defer \gset
SELECT lonnymq.message_heartbeat((:'ids'::bigint[])[3], (:'tokens'::integer[])[3], 600000) AS a_heartbeat \gset
SELECT lonnymq.message_fail((:'ids'::bigint[])[4], (:'tokens'::integer[])[4], 'mine') AS a_fail \gset
SELECT lonnymq.message_complete_batch((:'ids'::bigint[])[5:5], (:'tokens'::integer[])[5:5]) AS a_batch \gset
RESET ROLE;
SELECT is(:'a_complete'::text, 't', 'the holder completes');
SELECT is(:'a_defer'::text, 't', 'the holder defers');
SELECT is(:'a_heartbeat'::text, 't', 'the holder extends its lock');
SELECT is(:'a_fail'::text, 'retry', 'the holder fails its delivery');
SELECT is(:'a_batch'::text, '1', 'the holder completes a batch');

-- A lock taken before 0.9.0 has no holder: any role may settle it.
UPDATE lonnymq.message SET locked_by = NULL WHERE id = (:'ids'::bigint[])[6];
SET ROLE lmq_pgtap_lock_b;
SELECT lonnymq.message_complete((:'ids'::bigint[])[6], (:'tokens'::integer[])[6]) AS b_old \gset
RESET ROLE;
SELECT is(:'b_old'::text, 't', 'a lock without a holder (taken before 0.9.0) is settled by any role');

-- An expired lock recovered by another role is that role's.
SELECT lonnymq.message_create('expiring', 'x');
SET ROLE lmq_pgtap_lock_a;
SELECT d.id AS exp_id, d.num_attempts AS exp_a FROM lonnymq.message_dequeue(1, 1, 'expiring') AS d \gset
SELECT pg_sleep(0.01);
RESET ROLE;
SET ROLE lmq_pgtap_lock_b;
SELECT d.num_attempts AS exp_b FROM lonnymq.message_dequeue(600000, 1, 'expiring') AS d \gset
SELECT lonnymq.message_complete(:exp_id, :exp_b) AS exp_b_done \gset
RESET ROLE;
SELECT is(:'exp_b_done'::text, 't', 'the role that recovered an expired lock holds it');

SELECT * FROM finish();
ROLLBACK;
