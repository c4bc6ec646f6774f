\ir include/setup.psql
-- A message's states: their names (_message_state) through a message's life,
-- and a heartbeat that leaves no locked message early.  (That no row is in
-- no state is checked after every test: lonnymq_dev/invariants.py.)
SELECT plan(11);

CREATE FUNCTION pg_temp.state(p_id bigint)
RETURNS text
LANGUAGE sql
AS $$ SELECT lonnymq._message_state(m) FROM lonnymq.message AS m WHERE m.id = p_id $$;

-- ---------------------------------------------------------------- the names
SELECT lonnymq.message_create('s', 'now') AS now_id \gset
SELECT lonnymq.message_create('s', 'later', pg_temp.lmq_now() + 3600000) AS later_id \gset
SELECT is(pg_temp.state(:now_id), 'placed', 'a message due now is placed (ready)');
SELECT is(pg_temp.state(:later_id), 'scheduled', 'a message due later is scheduled');
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 's'))::integer, 1, '(dequeued)');
SELECT is(pg_temp.state(:now_id), 'locked', 'a delivered message is locked');

SELECT lonnymq.channel_pause('p');
SELECT lonnymq.message_create('p', 'waits') AS held_id \gset
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(60000, 1, 'p') $$, '(a paused channel delivers nothing)');
SELECT is(pg_temp.state(:held_id), 'held', 'a paused channel''s message, once a dequeue promoted it, is held');

-- ------------------------------------------- a heartbeat clears is_early
-- An expired lock made ready again (still locked, its holder may heartbeat
-- it) that is early: the heartbeat takes it out of the round order, and it
-- is then no longer early.
SELECT lonnymq.message_create('h', 'job') AS job_id \gset
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(1, 1, 'h'))::integer, 1, '(delivered with a 1 ms lock)');
SELECT pg_sleep(0.01);
SELECT is_empty($$ SELECT * FROM lonnymq.message_dequeue(60000, 1, 'none') $$, '(a dequeue promotes the expired lock)');
SELECT is(pg_temp.state(:job_id), 'placed', 'the expired lock is placed again');
UPDATE lonnymq.message SET is_early = TRUE WHERE id = :job_id;
SELECT ok(lonnymq.message_heartbeat(:job_id, 1, 60000), 'its holder''s heartbeat succeeds');
SELECT results_eq(
    format('SELECT lonnymq._message_state(m), m.is_early FROM lonnymq.message AS m WHERE m.id = %s', :job_id),
    $$ VALUES ('locked', FALSE) $$,
    'the heartbeat took it out of the round order: locked, and no longer early');

SELECT * FROM finish();
ROLLBACK;
