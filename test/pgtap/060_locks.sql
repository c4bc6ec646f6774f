\ir include/setup.psql
SELECT plan(23);

SELECT lonnymq.message_create('w', 'job') AS mid \gset
CREATE TEMP TABLE d1 AS SELECT * FROM lonnymq.message_dequeue(50, 1, 'w');
SELECT results_eq($$ SELECT id, num_attempts, is_recovered FROM d1 $$, 'VALUES (' || :mid || '::bigint, 1, false)',
    'first delivery: attempt 1, not recovered');
SELECT ok((SELECT dequeue_at FROM d1) <= pg_temp.lmq_now(), 'the returned dequeue_at is the time it became deliverable');
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(60000, 1, 'w') $$, 'a locked message is not delivered again');

-- Lock expiry: recovered inside dequeue, counting an attempt.
SELECT pg_sleep(0.06);
CREATE TEMP TABLE d2 AS SELECT * FROM lonnymq.message_dequeue(60000, 1, 'w');
SELECT results_eq($$ SELECT id, num_attempts, is_recovered FROM d2 $$, 'VALUES (' || :mid || '::bigint, 2, true)',
    'after its lock expires the message is delivered again: attempt 2, is_recovered');

-- Fencing
SELECT is(lonnymq.message_complete(:mid, 1), FALSE, 'the stale token (1) cannot complete');
SELECT is(lonnymq.message_defer(:mid, 1), FALSE, 'nor defer');
SELECT is(lonnymq.message_heartbeat(:mid, 1, 60000), FALSE, 'nor heartbeat');
SELECT is(lonnymq.message_complete(:mid, 3), FALSE, 'a future token (3) is refused too');
SELECT is((SELECT num_attempts FROM lonnymq.message WHERE id = :mid), 2, 'refused calls changed nothing');

-- Heartbeat only extends.
SELECT dequeue_at AS lock_until FROM lonnymq.message WHERE id = :mid \gset
SELECT is(lonnymq.message_heartbeat(:mid, 2, 1), TRUE, 'a heartbeat with the current token succeeds');
SELECT is((SELECT dequeue_at FROM lonnymq.message WHERE id = :mid), :lock_until::bigint, 'a shorter heartbeat does not shorten the lock');
SELECT is(lonnymq.message_heartbeat(:mid, 2, 600000), TRUE, 'a longer heartbeat');
SELECT cmp_ok((SELECT dequeue_at FROM lonnymq.message WHERE id = :mid), '>=', :lock_until::bigint + 500000, 'extends the lock');

-- Defer keeps the attempt count; NULL state keeps the saved state.
SELECT is(lonnymq.message_defer(:mid, 2, NULL, 'saved'::bytea), TRUE, 'defer with state');
SELECT is(lonnymq.message_complete(:mid, 2), FALSE, 'a deferred message is no longer locked: its token cannot complete it');
CREATE TEMP TABLE d3 AS SELECT * FROM lonnymq.message_dequeue(60000, 1, 'w');
SELECT results_eq($$ SELECT num_attempts, state, is_recovered FROM d3 $$, $$ VALUES (3, 'saved'::bytea, false) $$,
    'a deferred message comes back with its state and the next attempt number');
SELECT is(lonnymq.message_defer(:mid, 3, pg_temp.lmq_now() + 200), TRUE, 'defer with NULL state');
SELECT is((SELECT state FROM lonnymq.message WHERE id = :mid), 'saved'::bytea, 'keeps the saved state');
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(60000, 1, 'w') $$, 'a message deferred to the future waits');
SELECT pg_sleep(0.22);
CREATE TEMP TABLE d4 AS SELECT * FROM lonnymq.message_dequeue(60000, 1, 'w');
SELECT is((SELECT num_attempts FROM d4), 4, 'and is delivered when due');

-- Complete
SELECT is(lonnymq.message_complete(:mid, 4), TRUE, 'complete with the current token');
SELECT is(lonnymq.message_complete(:mid, 4), FALSE, 'a second complete returns false');

-- Deliveries that roll back give their messages back: a worker's
-- transaction that takes 40 messages one at a time and then fails leaves
-- all 40 deliverable.  (0.11.0: its takes also raise the marks, which must
-- never pass a message that the rollback makes ready again.)
CREATE FUNCTION pg_temp.take_n(p_n integer)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_got integer := 0;
    v_one integer;
BEGIN
    FOR i IN 1 .. p_n LOOP
        SELECT count(*) INTO v_one FROM lonnymq.message_dequeue(60000, 1);
        v_got := v_got + v_one;
    END LOOP;
    RETURN v_got;
END;
$$;
SELECT count(lonnymq.message_create('rb', convert_to('r' || g, 'UTF8'))) FROM generate_series(1, 40) AS g;
-- (A subtransaction that takes 40 and fails: its takes roll back.)
DO $$
BEGIN
    PERFORM pg_temp.take_n(40);
    RAISE EXCEPTION 'the worker fails';
EXCEPTION WHEN raise_exception THEN
    NULL;
END;
$$;
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(60000, 1000)), 40::bigint,
    'a worker''s 40 takes rolled back: all 40 messages are delivered again');

SELECT * FROM finish();
ROLLBACK;
