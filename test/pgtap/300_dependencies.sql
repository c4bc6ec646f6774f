\ir include/setup.psql
-- Dependencies (0.16.0, doc/dependencies.md): a message created with
-- p_after waits for those of its parents still in the queue; each rule of
-- the page, one outcome each.  tick() runs the promotions a dequeue runs
-- (release rows among them) from the beginning of message_due_ix.
SELECT plan(74);

CREATE FUNCTION pg_temp.status(p_id bigint)
RETURNS text
LANGUAGE sql
AS $$ SELECT s.status FROM lonnymq.message_status(p_id) AS s $$;

-- The token of p_id's delivery: its channel's ready messages are
-- delivered (after the promotions a dequeue would run) until it is.
CREATE FUNCTION pg_temp.token(p_id bigint)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_channel text := (SELECT m.channel FROM lonnymq.message AS m WHERE m.id = p_id);
    v_token integer;
BEGIN
    PERFORM lonnymq.tick();
    SELECT d.num_attempts INTO v_token
    FROM lonnymq.message_dequeue(60000, 1000, v_channel) AS d
    WHERE d.id = p_id;
    RETURN v_token;
END;
$$;

-- Deliver p_id, then complete it; or fail it with p_error (its channel's
-- last attempt: dead).
CREATE FUNCTION pg_temp.complete(p_id bigint)
RETURNS boolean
LANGUAGE sql
AS $$ SELECT lonnymq.message_complete(p_id, pg_temp.token(p_id)) $$;

CREATE FUNCTION pg_temp.fail(p_id bigint, p_error text)
RETURNS text
LANGUAGE sql
AS $$ SELECT lonnymq.message_fail(p_id, pg_temp.token(p_id), p_error) $$;

-- p_times ticks: the promotions of as many dequeues (release rows, 100
-- edges each, and the released messages).
CREATE FUNCTION pg_temp.ticks(p_times integer)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    FOR i IN 1..p_times LOOP
        PERFORM lonnymq.tick();
    END LOOP;
END;
$$;

SELECT lonnymq.channel_set('mortal', p_max_attempts => 1);

-- ---------------------------------------------------------------- bad input
SELECT lonnymq.message_create('p', 'p0') AS p0 \gset
SELECT pg_temp.lmq_snapshot() AS before \gset
SELECT throws_ok(
    format('SELECT lonnymq.message_create(%L, %L, p_after => ARRAY[%s])', 'c', 'x', :p0 + 1000),
    '22023', NULL, 'an id message_id_seq never gave: 22023 (a future id too: no cycle can be made)');
SELECT throws_ok($$SELECT lonnymq.message_create('c', 'x', p_after => ARRAY[0])$$, '22023', NULL, 'id 0: 22023');
SELECT throws_ok(
    format('SELECT lonnymq.message_create(%L, %L, p_after => ARRAY[%s, NULL])', 'c', 'x', :p0),
    '22004', NULL, 'a NULL id: 22004');
SELECT throws_ok(
    format('SELECT lonnymq.message_create(%L, %L, p_after => ARRAY[[%s]])', 'c', 'x', :p0),
    '22023', NULL, 'a two-dimensional list: 22023');
SELECT throws_ok(
    format('SELECT lonnymq.message_create(%L, %L, p_after => array_fill(%s::bigint, ARRAY[10001]))', 'c', 'x', :p0),
    '22023', NULL, 'more than 10000 parents: 22023');
SELECT throws_ok(
    format('SELECT lonnymq.message_create(%L, %L, p_after => ARRAY[%s], p_after_mode => %L)', 'c', 'x', :p0, 'done'),
    '22023', NULL, 'an unknown mode: 22023');
SELECT throws_ok(
    $$SELECT lonnymq.message_create_batch('c', ARRAY['x']::bytea[], p_after_mode => 'any')$$,
    '22023', NULL, 'a batch: the same checks');
SELECT throws_ok(
    format('SELECT lonnymq.message_publish(%L, %L, p_after => ARRAY[%s])', 'c.x', 'x', :p0 + 1000),
    '22023', NULL, 'a publish: the same checks, even bound to no channel');
SELECT lonnymq.schedule_set('every-hour', 'sc', 'tick', 3600000) AS schedule_made \gset
SELECT pg_temp.lmq_snapshot() AS before \gset
SELECT throws_ok(
    format(
        'SELECT lonnymq.message_create(%L, %L, p_after => ARRAY[%s])', 'c', 'x',
        (SELECT m.id FROM lonnymq.message AS m WHERE m.schedule = 'every-hour')
    ),
    '22023', NULL, 'a schedule''s pending occurrence is no message yet: 22023');
SELECT (SELECT m.id FROM lonnymq.message AS m WHERE m.schedule = 'every-hour') AS occurrence,
    pg_sequence_last_value('lonnymq.message_id_seq') AS last_id \gset
SELECT lonnymq.topic_bind('occ.*', 'occ');
SELECT throws_ok(
    format('SELECT lonnymq.message_create_batch(%L, ARRAY[%L]::bytea[], p_after => ARRAY[%s])', 'c', 'x', :occurrence),
    '22023', NULL, 'by a batch too');
SELECT throws_ok(
    format('SELECT lonnymq.message_publish(%L, %L, p_after => ARRAY[%s])', 'occ.x', 'x', :occurrence),
    '22023', NULL, 'and a publish');
SELECT throws_ok(
    format('SELECT lonnymq.message_publish_batch(%L, ARRAY[%L]::bytea[], p_after => ARRAY[%s])', 'occ.x', 'x', :occurrence),
    '22023', NULL, 'and a batch publish');
SELECT is(
    pg_sequence_last_value('lonnymq.message_id_seq'), :last_id::bigint,
    'refused before any id is drawn (a sequence does not roll back)');
SELECT is(pg_temp.lmq_snapshot(), :'before', 'and a refused call changes nothing');

-- ---------------------------------------------------------------- fan-in
SELECT lonnymq.message_create('p', 'a') AS a, lonnymq.message_create('q', 'b') AS b \gset
SELECT lonnymq.message_create('c', 'c', p_after => ARRAY[:a, :b, :a]) AS c \gset
SELECT is(pg_temp.status(:c), 'waiting', 'a message with parents in the queue waits');
SELECT is(
    (SELECT s.waiting FROM lonnymq.channel_stats('c') AS s), 1::bigint, 'channel_stats counts it waiting');
SELECT is(
    (SELECT m.value FROM lonnymq.metrics AS m WHERE m.metric = 'lonnymq_messages' AND m.state = 'waiting' AND m.channel = '*'),
    1::double precision, 'and so do the metrics');
SELECT is(
    (SELECT s.scheduled FROM lonnymq.channel_stats('c') AS s), 0::bigint, 'not as scheduled');
SELECT is(pg_temp.lmq_take(60000, 'c'), NULL, 'it is not delivered');
SELECT ok(pg_temp.complete(:a), 'one parent completes');
SELECT is(pg_temp.status(:c), 'waiting', 'the repeated id counts once: still waiting for the other');
SELECT ok(pg_temp.complete(:b), 'the other completes, in another channel');
SELECT is(pg_temp.status(:c), 'ready', 'the last parent''s completion releases it, in the same call');
SELECT is(pg_temp.lmq_take(60000, 'c'), 'c:c', 'and it is delivered');

-- Its own time: the later of its dequeue_at and the release.
SELECT lonnymq.message_create('p', 'a2') AS a2 \gset
SELECT lonnymq.message_create('c', 'later', pg_temp.lmq_now() + 3600000, p_after => ARRAY[:a2]) AS later \gset
SELECT is(
    (SELECT s.dequeue_at > pg_temp.lmq_now() + 3000000 FROM lonnymq.message_status(:later) AS s), TRUE,
    'a waiting message shows its own dequeue_at');
SELECT ok(pg_temp.complete(:a2), 'its parent completes');
SELECT is(pg_temp.status(:later), 'scheduled', 'released, it waits for its own time');

-- ---------------------------------------------------------------- fan-in of 200: bucketed
SELECT array_agg(i) AS wide FROM lonnymq.message_create_batch('w', array_fill('w'::bytea, ARRAY[200])) AS i \gset
SELECT lonnymq.message_create('c', 'sink', p_after => :'wide'::bigint[]) AS sink \gset
SELECT is(
    (SELECT w.num_waiting FROM lonnymq.message_wait AS w WHERE w.child_id = :sink AND w.bucket = -1), 4,
    '200 parents: 4 buckets of 50 (ceil(200 / 64)), the child counts buckets');
SELECT is(
    (SELECT string_agg(w.num_waiting::text, ',' ORDER BY w.bucket) FROM lonnymq.message_wait AS w WHERE w.child_id = :sink AND w.bucket >= 0),
    '50,50,50,50', 'each bucket counts its parents');
SELECT is(
    (SELECT lonnymq.message_complete_batch(array_agg(d.id), array_agg(d.num_attempts))
     FROM lonnymq.message_dequeue(60000, 199, 'w') AS d),
    199, '199 of them complete in one batch');
SELECT is(pg_temp.status(:sink), 'waiting', 'one short: still waiting');
SELECT is(
    (SELECT count(*) FROM lonnymq.message_wait AS w WHERE w.child_id = :sink AND w.bucket >= 0), 1::bigint,
    'three buckets reached zero and went');
SELECT ok(pg_temp.complete((:'wide'::bigint[])[200]), 'the last one completes');
SELECT is(pg_temp.status(:sink), 'ready', 'released');
SELECT is((SELECT count(*) FROM lonnymq.message_wait), 0::bigint, 'no count left');

-- ---------------------------------------------------------------- fan-out of 250
SELECT lonnymq.message_create('p', 'hub') AS hub \gset
SELECT count(*) FROM lonnymq.message_create_batch('kids', array_fill('k'::bytea, ARRAY[250]), p_after => ARRAY[:hub]);
SELECT ok(pg_temp.complete(:hub), 'a parent of 250 completes');
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel = 'kids' AND m.dequeue_at < 2305843009213693952), 100::bigint,
    'its call releases 100 (_release_batch_size)');
SELECT is(
    (SELECT convert_from(m.state, 'UTF8')::bigint FROM lonnymq.message AS m WHERE m.id = :hub AND m.schedule = ''),
    (SELECT max(m.id) FROM lonnymq.message AS m WHERE m.channel = 'kids' AND m.dequeue_at < 2305843009213693952),
    'and leaves a release row, its id the parent''s, its cursor the last child released');
SELECT pg_temp.ticks(1);
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel = 'kids' AND m.dequeue_at < 2305843009213693952), 200::bigint,
    'a promotion releases the next 100');
SELECT pg_temp.ticks(1);
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel = 'kids' AND m.dequeue_at < 2305843009213693952), 250::bigint,
    'and the next one the rest');
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.schedule = '' AND m.key IS NOT NULL), 0::bigint,
    'the release row is gone');
SELECT is(
    (SELECT count(*) FROM lonnymq.message_edge AS e WHERE e.parent_id = :hub), 0::bigint, 'and so are the edges');

-- ---------------------------------------------------------------- a dead parent
SELECT lonnymq.message_create('mortal', 'dies') AS dies \gset
SELECT lonnymq.message_create('c', 'child', p_after => ARRAY[:dies]) AS child \gset
SELECT lonnymq.message_create('c', 'grandchild', p_after => ARRAY[:child]) AS grandchild \gset
SELECT lonnymq.message_create('c', 'anyway', p_after => ARRAY[:dies], p_after_mode => 'ended') AS anyway \gset
SELECT pg_temp.lmq_snapshot() AS before \gset
SELECT is(pg_temp.fail(:dies, 'boom'), 'dead', 'a parent dies');
SELECT pg_temp.ticks(3);
SELECT is(
    (SELECT string_agg(pg_temp.status(x), ',') FROM unnest(ARRAY[:child, :grandchild, :anyway]) AS x),
    'dead,dead,ready',
    'its dependent is dead-lettered, and that one''s dependent; one created with ''ended'' runs');
SELECT is(
    (SELECT d.last_error FROM lonnymq.dead_letter AS d WHERE d.id = :child),
    format('lonnymq: parent %s was dead-lettered', :dies), 'the dead letter''s last error names the parent');
SELECT is(
    (SELECT d.last_error FROM lonnymq.dead_letter AS d WHERE d.id = :grandchild),
    format('lonnymq: parent %s was dead-lettered', :child), 'and its own dependent''s names it');
SELECT is(
    (SELECT d.after FROM lonnymq.dead_letter AS d WHERE d.id = :child), ARRAY[:dies]::bigint[],
    'a dead dependent keeps the parents it waited for');

-- A parent that is a dead letter already.
SELECT lonnymq.message_create('c', 'too late', p_after => ARRAY[:a, :dies]) AS late \gset
SELECT is(pg_temp.status(:late), 'dead', 'created after a dead parent: a dead letter at once, its id returned');
SELECT is(
    (SELECT d.last_error FROM lonnymq.dead_letter AS d WHERE d.id = :late),
    format('lonnymq: parent %s is a dead letter', :dies), 'naming that parent');
SELECT is(
    pg_temp.status(lonnymq.message_create('c', 'regardless', p_after => ARRAY[:dies], p_after_mode => 'ended')),
    'ready', 'with ''ended'' it counts as ended: not waiting');
SELECT is(
    pg_temp.status(lonnymq.message_create('c', 'after done', p_after => ARRAY[:a, :b])),
    'ready', 'parents already gone (completed) count as done');

-- ---------------------------------------------------------------- redrive
SELECT lonnymq.dead_letter_redrive(p_ids => ARRAY[:grandchild]) AS redriven_alone \gset
SELECT is(:redriven_alone, 0, 'a dependent whose parent is still a dead letter stays dead');
SELECT is(
    (SELECT d.last_error FROM lonnymq.dead_letter AS d WHERE d.id = :grandchild),
    format('lonnymq: parent %s is a dead letter', :child), 'saying which');
SELECT is(
    lonnymq.dead_letter_redrive(p_ids => ARRAY[:grandchild, :child, :dies]), 3,
    'the parent and its dependents redriven in one call');
SELECT is(
    (SELECT string_agg(pg_temp.status(x), ',') FROM unnest(ARRAY[:dies, :child, :grandchild]) AS x),
    'ready,waiting,waiting', 'with their ids: the dependents wait for their parents again');
SELECT ok(pg_temp.complete(:dies), 'the redriven parent completes');
SELECT is(pg_temp.status(:child), 'ready', 'its dependent is released');

-- ---------------------------------------------------------------- cancel
SELECT lonnymq.message_create('p', 'cancelled', pg_temp.lmq_now() + 3600000) AS doomed \gset
SELECT lonnymq.message_create('c', 'with it', p_after => ARRAY[:doomed]) AS with_it \gset
SELECT lonnymq.message_create('c', 'and this', p_after => ARRAY[:with_it]) AS and_this \gset
SELECT lonnymq.message_create('c', 'but not this', p_after => ARRAY[:doomed], p_after_mode => 'ended') AS not_this \gset
SELECT ok(lonnymq.message_cancel(:doomed), 'a parent is cancelled');
SELECT pg_temp.ticks(3);
SELECT is(
    (SELECT string_agg(pg_temp.status(x), ',') FROM unnest(ARRAY[:with_it, :and_this, :not_this]) AS x),
    'gone,gone,ready', 'its dependents are cancelled, transitively; one created with ''ended'' runs');
SELECT lonnymq.message_create('p', 'kept') AS kept \gset
SELECT lonnymq.message_create('c', 'cancel me', p_after => ARRAY[:kept]) AS waiting_one \gset
SELECT ok(lonnymq.message_cancel(:waiting_one), 'a waiting message can be cancelled');
SELECT ok(pg_temp.complete(:kept), 'its parent''s end then changes nothing');
SELECT is((SELECT count(*) FROM lonnymq.message_edge AS e WHERE e.parent_id = :kept), 0::bigint, 'and its edge goes');

-- ---------------------------------------------------------------- batches, publish, limits, keys
SELECT lonnymq.message_create('p', 'batch parent') AS bp \gset
SELECT is(
    (SELECT count(*) FROM lonnymq.message_create_batch('cb', ARRAY['1', '2', '3']::bytea[], p_after => ARRAY[:bp]) AS i
     WHERE pg_temp.status(i) = 'waiting'),
    3::bigint, 'a batch: every message waits for the call''s parents');
SELECT lonnymq.topic_bind('t.*', 'tc1'), lonnymq.topic_bind('t.*', 'tc2');
SELECT is(lonnymq.message_publish('t.x', 'pub', p_after => ARRAY[:bp]), 2, 'a publish: one copy per channel');
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel IN ('tc1', 'tc2') AND m.dequeue_at >= 2305843009213693952), 2::bigint,
    'every copy waits');
SELECT lonnymq.channel_set('lim', p_max_concurrency => 1);
SELECT lonnymq.message_create('lim', 'limited', p_after => ARRAY[:bp]) AS limited \gset
SELECT lonnymq.message_create('p', 'key parent', pg_temp.lmq_now() + 3600000) AS kp \gset
SELECT lonnymq.message_create('cb', 'dup', p_key => 'k1', p_after => ARRAY[:bp]) AS dup \gset
SELECT is(
    lonnymq.message_create('cb', 'dup again', p_key => 'k1', p_after => ARRAY[:kp]), :dup::bigint,
    'a duplicate key returns the holder');
SELECT is(
    (SELECT count(*) FROM lonnymq.message_edge AS e WHERE e.parent_id = :kp), 0::bigint, 'and adds no parent to it');
SELECT ok(pg_temp.complete(:bp), 'their parent completes');
SELECT pg_temp.ticks(1);
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel IN ('cb', 'tc1', 'tc2', 'lim') AND m.dequeue_at >= 2305843009213693952),
    0::bigint, 'all released');
SELECT is(pg_temp.lmq_take(60000, 'lim'), 'lim:limited', 'the limited channel admits and delivers its released one');

-- A dead parent, a batch: all dead at once; max_size: no room taken.
SELECT lonnymq.channel_set('small', p_max_size => 1);
SELECT is(
    (SELECT count(*) FROM lonnymq.message_create_batch('small', ARRAY['1', '2']::bytea[], p_after => ARRAY[:late]) AS i
     WHERE pg_temp.status(i) = 'dead'),
    2::bigint, 'a batch after a dead parent: every message a dead letter at once');
SELECT isnt(lonnymq.message_create('small', 'fits'), NULL, 'and they took no room in a max_size channel');

-- ---------------------------------------------------------------- channel_drop purges: a cancel
SELECT lonnymq.message_create('doomed', 'purged') AS purged \gset
SELECT lonnymq.message_create('c', 'orphan', p_after => ARRAY[:purged]) AS orphan \gset
SELECT ok(lonnymq.channel_drop('doomed', TRUE), 'a channel with a parent is purged');
SELECT pg_temp.ticks(2);
SELECT is(pg_temp.status(:orphan), 'gone', 'its dependent is cancelled');

SELECT * FROM finish();
ROLLBACK;
