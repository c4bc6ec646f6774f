\ir include/setup.psql
-- message_complete_dequeue (0.10.0): the completes of message_complete_batch,
-- then the delivery of message_dequeue, in one call.  (Its NOTICEs for
-- refused completes are asserted in test/python/test_complete_dequeue.py:
-- SQL cannot catch a notice.)
SELECT plan(32);

-- "channel:content" of each row a call returned, in order.
CREATE FUNCTION pg_temp.cd(p_ids bigint[], p_tokens integer[], p_limit integer DEFAULT 1, p_channel text DEFAULT NULL)
RETURNS text[]
LANGUAGE sql
AS $$
    SELECT coalesce(array_agg(d.channel || ':' || convert_from(d.content, 'UTF8') ORDER BY d.ord), '{}')
    FROM lonnymq.message_complete_dequeue(p_ids, p_tokens, 60000, p_limit, p_channel)
        WITH ORDINALITY AS d (id, channel, content, state, num_attempts, dequeue_at, is_recovered, ord)
$$;

-- The locks a channel holds, as (ids, tokens).
CREATE FUNCTION pg_temp.locks(p_channel text, OUT ids bigint[], OUT tokens integer[])
LANGUAGE sql
AS $$
    SELECT array_agg(m.id ORDER BY m.id), array_agg(m.num_attempts ORDER BY m.id)
    FROM lonnymq.message AS m
    WHERE m.channel = p_channel AND m.is_locked
$$;

-- ---------------------------------------------------------------- contract
SELECT count(*) FROM lonnymq.message_create_batch('w', ARRAY['w1', 'w2', 'w3', 'w4', 'w5']::bytea[]);
SELECT is(pg_temp.cd(NULL, NULL), ARRAY['w:w1'], 'NULL arrays: nothing to complete, one message delivered');
SELECT is(pg_temp.cd('{}', '{}'), ARRAY['w:w2'], 'empty arrays: the same');
SELECT is(
    (SELECT pg_get_function_result('lonnymq.message_complete_dequeue(bigint[], integer[], bigint, integer, text)'::regprocedure)),
    (SELECT pg_get_function_result('lonnymq.message_dequeue(bigint, integer, text)'::regprocedure)),
    'it returns the columns of message_dequeue');

SELECT l.ids AS w_ids, l.tokens AS w_tokens FROM pg_temp.locks('w') AS l \gset
SELECT is(pg_temp.cd(:'w_ids', :'w_tokens', 2), ARRAY['w:w3', 'w:w4'], 'completes both locks, then delivers the next two');
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.id = any(:'w_ids'::bigint[])), 0::bigint,
    'the completed messages are gone');
SELECT is(
    (SELECT array_agg(convert_from(m.content, 'UTF8') ORDER BY m.id) FROM lonnymq.message AS m
     WHERE m.channel = 'w' AND m.is_locked),
    ARRAY['w3', 'w4'], 'and the delivered ones are locked');

-- Completing the last messages with nothing left to deliver: no rows, and
-- the completes are kept.
SELECT l.ids AS w_ids, l.tokens AS w_tokens FROM pg_temp.locks('w') AS l \gset
SELECT is(pg_temp.cd(:'w_ids', :'w_tokens', 5, 'w'), ARRAY['w:w5'], 'completes two and delivers the one left');
SELECT l.ids AS w_ids, l.tokens AS w_tokens FROM pg_temp.locks('w') AS l \gset
SELECT is(pg_temp.cd(:'w_ids', :'w_tokens', 1, 'w'), '{}'::text[], 'then nothing is ready: no rows');
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel = 'w'),
    0::bigint, 'but the last message was completed');

-- ---------------------------------------------------------------- fencing
SELECT count(*) FROM lonnymq.message_create_batch('f', ARRAY['f1', 'f2', 'f3']::bytea[]);
-- f1 locked for 1 ms: expired at once.
SELECT d.id AS f_id, d.num_attempts AS f_tok FROM lonnymq.message_complete_dequeue(NULL, NULL, 1, 1, 'f') AS d \gset
SELECT pg_sleep(0.05);
SELECT is(
    pg_temp.cd(ARRAY[:f_id]::bigint[], ARRAY[:f_tok + 1], 1, 'f'), ARRAY['f:f2'],
    'a stale token: the message is not completed, and the call still delivers');
SELECT is(
    (SELECT m.is_locked FROM lonnymq.message AS m WHERE m.id = :f_id), TRUE,
    'the message with the stale token stays locked');
SELECT pg_temp.cd(NULL, NULL, 1, 'f');
SELECT d.num_attempts AS f_new FROM lonnymq.message_dequeue(60000, 1, 'f') AS d WHERE d.id = :f_id \gset
SELECT is(:f_new, :f_tok + 1, 'the expired lock is delivered again, with a new token');
SELECT is(pg_temp.cd(ARRAY[:f_id]::bigint[], ARRAY[:f_tok], 1, 'f'), '{}'::text[], 'the old token completes nothing');
SELECT is(
    (SELECT m.num_attempts FROM lonnymq.message AS m WHERE m.id = :f_id AND m.is_locked), :f_new,
    'the new delivery keeps its lock');

-- Another role's lock is not completed.
CREATE ROLE lmq_pgtap_cd_a;
CREATE ROLE lmq_pgtap_cd_b;
SELECT lonnymq.grant_access('lmq_pgtap_cd_a', 'consumer');
SELECT lonnymq.grant_access('lmq_pgtap_cd_b', 'consumer');
SELECT lonnymq.message_create('r', 'r1');
SET ROLE lmq_pgtap_cd_a;
SELECT d.id AS r_id, d.num_attempts AS r_tok FROM lonnymq.message_complete_dequeue(NULL, NULL, 60000, 1, 'r') AS d \gset
RESET ROLE;
SET ROLE lmq_pgtap_cd_b;
SELECT count(*) AS r_b FROM lonnymq.message_complete_dequeue(ARRAY[:r_id]::bigint[], ARRAY[:r_tok], 60000, 1, 'r') \gset
RESET ROLE;
SELECT is(
    (SELECT m.locked_by::text FROM lonnymq.message AS m WHERE m.id = :r_id), 'lmq_pgtap_cd_a',
    'another role''s complete_dequeue leaves the lock to its holder');
SET ROLE lmq_pgtap_cd_a;
SELECT count(*) AS r_a FROM lonnymq.message_complete_dequeue(ARRAY[:r_id]::bigint[], ARRAY[:r_tok], 60000, 1, 'r') \gset
RESET ROLE;
SELECT is((SELECT count(*) FROM lonnymq.message AS m WHERE m.id = :r_id), 0::bigint, 'the holder completes it');

-- ---------------------------------------------------------------- limits
-- A slot that the complete frees is used by the same call.
SELECT lonnymq.channel_set('one', p_max_concurrency => 1);
SELECT count(*) FROM lonnymq.message_create_batch('one', ARRAY['o1', 'o2', 'o3']::bytea[]);
SELECT is(pg_temp.cd(NULL, NULL, 1, 'one'), ARRAY['one:o1'], 'max_concurrency 1: the first message');
SELECT is(pg_temp.cd(NULL, NULL, 1, 'one'), '{}'::text[], 'nothing more while it is locked');
SELECT l.ids AS o_ids, l.tokens AS o_tokens FROM pg_temp.locks('one') AS l \gset
SELECT is(pg_temp.cd(:'o_ids', :'o_tokens', 1, 'one'), ARRAY['one:o2'], 'completing it frees the slot for the same call');
SELECT is((SELECT c.num_admitted FROM lonnymq.channel AS c WHERE c.name = 'one'), 1, 'one lock admitted');
SELECT l.ids AS o_ids, l.tokens AS o_tokens FROM pg_temp.locks('one') AS l \gset
SELECT is(pg_temp.cd(:'o_ids', :'o_tokens'), ARRAY['one:o3'], 'without p_channel too: the channel rejoins the rotation at once');

-- max_size: room made by the completes.
SELECT lonnymq.channel_set('full', p_max_size => 2);
SELECT count(*) FROM lonnymq.message_create_batch('full', ARRAY['s1', 's2']::bytea[]);
SELECT is(lonnymq.message_create('full', 's3'), NULL, 'max_size 2: a third message is refused');
SELECT pg_temp.cd(NULL, NULL, 2, 'full');
SELECT l.ids AS s_ids, l.tokens AS s_tokens FROM pg_temp.locks('full') AS l \gset
SELECT is(pg_temp.cd(:'s_ids', :'s_tokens', 1, 'full'), '{}'::text[], 'completing both leaves nothing to deliver');
SELECT isnt(lonnymq.message_create('full', 's3'), NULL, 'and makes room');

-- ---------------------------------------------------------------- fairness
-- The delivery is message_dequeue's: channels take turns.
SELECT count(*) FROM lonnymq.message_create_batch('a', ARRAY['a1', 'a2', 'a3']::bytea[]);
SELECT count(*) FROM lonnymq.message_create_batch('b', ARRAY['b1', 'b2', 'b3']::bytea[]);
SELECT pg_temp.cd(NULL, NULL, 10, 'full');
SELECT is(pg_temp.cd(NULL, NULL, 4), ARRAY['a:a1', 'b:b1', 'a:a2', 'b:b2'], 'a batch is shared round-robin');
SELECT l.ids AS a_ids, l.tokens AS a_tokens FROM pg_temp.locks('a') AS l \gset
SELECT is(pg_temp.cd(:'a_ids', :'a_tokens', 2), ARRAY['a:a3', 'b:b3'], 'and the rotation goes on after completes');

-- ---------------------------------------------------------------- bad input
SELECT lonnymq.message_create('bad', 'x1');
SELECT d.id AS x_id, d.num_attempts AS x_tok FROM lonnymq.message_dequeue(60000, 1, 'bad') AS d \gset
SELECT lonnymq.message_create('bad', 'x2');
SELECT pg_temp.lmq_snapshot() AS before \gset
SELECT throws_ok(
    format('SELECT * FROM lonnymq.message_complete_dequeue(ARRAY[%s, %s]::bigint[], ARRAY[%s], 60000)', :x_id, :x_id, :x_tok),
    '22023', NULL, 'arrays of different lengths: 22023');
SELECT throws_ok(
    format('SELECT * FROM lonnymq.message_complete_dequeue(ARRAY[%s]::bigint[], ARRAY[%s], 60000, 0)', :x_id, :x_tok),
    '22023', NULL, 'p_limit 0: 22023, before anything is completed');
SELECT throws_ok(
    format('SELECT * FROM lonnymq.message_complete_dequeue(ARRAY[%s, NULL]::bigint[], ARRAY[%s, 1], 60000)', :x_id, :x_tok),
    '22004', NULL, 'a NULL id: 22004');
SELECT throws_ok(
    format('SELECT * FROM lonnymq.message_complete_dequeue(NULL, ARRAY[%s], 60000)', :x_tok),
    '22023', NULL, 'NULL ids with tokens: 22023');
SELECT throws_ok(
    format('SELECT * FROM lonnymq.message_complete_dequeue(ARRAY[%s]::bigint[], ARRAY[%s], NULL)', :x_id, :x_tok),
    '22004', NULL, 'a NULL p_lock_ms: 22004');
SELECT is(pg_temp.lmq_snapshot(), :'before', 'and nothing changed');

SELECT * FROM finish();
ROLLBACK;
