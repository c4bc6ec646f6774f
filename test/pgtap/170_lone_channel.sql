\ir include/setup.psql
-- A channel without limits that is the only eligible one is served without
-- writing its row: serving it leaves it first in the rotation anyway, so
-- any number of consumers take from it at once, as from a plain SKIP
-- LOCKED table, and it gets no new row version per serve (nor when its
-- floor is raised: that is channel_floor).  Alone or in batches, and the
-- rotation is what it would have been.
SELECT plan(17);

CREATE FUNCTION pg_temp.take(p_limit integer DEFAULT 1, p_lock_ms bigint DEFAULT 60000)
RETURNS text
LANGUAGE sql
AS $$
    SELECT string_agg(d.channel || ':' || convert_from(d.content, 'UTF8'), ',' ORDER BY d.ord)
    FROM lonnymq.message_dequeue(p_lock_ms, p_limit)
        WITH ORDINALITY AS d (id, channel, content, state, num_attempts, dequeue_at, is_recovered, ord)
$$;

-- Row versions of the channel table written so far by this transaction.
CREATE FUNCTION pg_temp.channel_writes()
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT n_tup_upd + n_tup_ins FROM pg_stat_xact_user_tables
    WHERE schemaname = 'lonnymq' AND relname = 'channel'
$$;

-- ---------------------------------------------------------------- one channel
SELECT lonnymq.message_create('solo', 'a');
SELECT lonnymq.message_create('solo', 'b');
SELECT lonnymq.message_create('solo', 'c');
SELECT lonnymq.message_create('solo', 'd');
-- The first dequeue finds the new channel through its wake-up, and leaves
-- it in the rotation, eligible.
SELECT is(pg_temp.take(), 'solo:a', 'a is delivered');
SELECT pg_temp.channel_writes() AS writes \gset
SELECT is(pg_temp.take(), 'solo:b', 'b, from the only eligible channel');
SELECT is(pg_temp.take(5), 'solo:c,solo:d', 'a batch from the only eligible channel, in order');
-- (The first serve raised the channel's floor: in channel_floor, not here.)
SELECT is(pg_temp.channel_writes() - :writes, 0::bigint,
    'neither wrote the channel row');

-- What a delivery returns: the dequeue_at before the lock, is_recovered.
SELECT lonnymq.message_create('solo', 'urgent', -5) AS urgent_id \gset
SELECT lonnymq.message_create('solo', 'short') AS short_id \gset
SELECT is(
    (SELECT d.id || ' ' || d.dequeue_at || ' ' || d.num_attempts || ' ' || d.is_recovered
     FROM lonnymq.message_dequeue(60000) AS d),
    :urgent_id || ' -5 1 false',
    'priority first; dequeue_at as it was, first attempt, not recovered'
);
SELECT is(
    (SELECT count(*) FROM lonnymq.message_dequeue(1) AS d WHERE d.id = :short_id),
    1::bigint,
    'a 1 ms lock'
);
SELECT pg_sleep(0.02);
SELECT d.id || ' ' || d.num_attempts || ' ' || d.is_recovered AS got
FROM lonnymq.message_dequeue(60000, 3) AS d \gset
SELECT is(:'got', :short_id || ' 2 true', 'an expired lock is recovered by a batch, with one more attempt');
SELECT is(
    (SELECT m.attempt_log -> 0 ->> 'error' FROM lonnymq.message AS m WHERE m.id = :short_id),
    'lock expired',
    'and logged'
);
-- The priority message lowered the floor (a lowering row); the next raise
-- superseded it.  Neither is a write of the channel row.
SELECT is(
    (pg_temp.channel_writes() - :writes) || ' ' || (SELECT count(*) FROM lonnymq.channel_floor WHERE NOT is_raise),
    '0 0',
    'these never wrote the channel row; the floor rose past the priority message'
);

-- ---------------------------------------------------------------- the rotation
-- A second channel becomes ready: the rotation alternates as before.  (solo
-- was last served before other became ready, so solo comes first.)
SELECT lonnymq.message_create('solo', 's1');
SELECT lonnymq.message_create('solo', 's2');
SELECT lonnymq.message_create('other', 'o1');
SELECT lonnymq.message_create('other', 'o2');
SELECT is(pg_temp.take(), 'solo:s1', 'solo first');
SELECT is(pg_temp.take(), 'other:o1', 'then the new channel');
SELECT is(pg_temp.take(), 'solo:s2', 'then solo again');
SELECT is(pg_temp.take(), 'other:o2', 'round-robin');

-- ---------------------------------------------------------------- limits and dead letters
-- A channel given a limit has its row locked and written: max_concurrency
-- holds.
SELECT lonnymq.channel_set('limited', p_max_concurrency => 1);
SELECT lonnymq.message_create('limited', 'm1');
SELECT lonnymq.message_create('limited', 'm2');
SELECT is(pg_temp.take(5), 'limited:m1', 'max_concurrency 1: one message of a batch of 5');

-- An expired lock past max_attempts goes to the dead letters, and the
-- batch gets the next message.
SELECT lonnymq.channel_set('poison', p_max_attempts => 1);
SELECT lonnymq.message_create('poison', 'p1') AS p1_id \gset
SELECT is((SELECT count(*) FROM lonnymq.message_dequeue(1, 1, 'poison')), 1::bigint, 'p1 locked for 1 ms');
SELECT lonnymq.message_create('poison', 'p2');
SELECT pg_sleep(0.02);
SELECT is(
    (SELECT string_agg(convert_from(d.content, 'UTF8'), ',') FROM lonnymq.message_dequeue(60000, 5) AS d
     WHERE d.channel = 'poison'),
    'p2',
    'the poisoned lock is not delivered; the next message is'
);
SELECT is(
    (SELECT last_error FROM lonnymq.dead_letter WHERE id = :p1_id),
    'lock expired',
    'it is in the dead letters'
);

SELECT * FROM finish();
ROLLBACK;
