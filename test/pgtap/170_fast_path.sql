\ir include/setup.psql
-- message_dequeue's fast path (0.3.0): one eligible channel without limits
-- is served without locking or writing its row, alone or in batches (but
-- for a batch's floor raise, at most once a second: 0.7.0), and the
-- rotation is what it would have been.
SELECT plan(18);

CREATE FUNCTION pg_temp.take(p_limit integer DEFAULT 1, p_lock_ms bigint DEFAULT 60000)
RETURNS text
LANGUAGE sql
AS $$
    SELECT string_agg(d.channel || ':' || convert_from(d.content, 'UTF8'), ',' ORDER BY d.ord)
    FROM lonnymq.message_dequeue(p_lock_ms, p_limit)
        WITH ORDINALITY AS d (id, channel, content, state, num_attempts, dequeue_at, is_recovered, ord)
$$;

-- The channel row as stored: a write gives it a new ctid, a row lock sets xmax.
CREATE FUNCTION pg_temp.row_of(p_channel text)
RETURNS text
LANGUAGE sql
AS $$ SELECT c.ctid::text || '/' || c.xmax::text FROM lonnymq.channel AS c WHERE c.name = p_channel $$;

-- ---------------------------------------------------------------- one channel
SELECT lonnymq.message_create('solo', 'a');
SELECT lonnymq.message_create('solo', 'b');
SELECT lonnymq.message_create('solo', 'c');
SELECT lonnymq.message_create('solo', 'd');
-- The first dequeue finds the new channel through its wake-up (the general
-- way), and leaves it in the rotation, eligible.
SELECT is(pg_temp.take(), 'solo:a', 'a is delivered');
SELECT pg_temp.row_of('solo') AS solo_row \gset
SELECT is(pg_temp.take(), 'solo:b', 'b, from the only eligible channel');
SELECT is(pg_temp.row_of('solo'), :'solo_row', 'the channel row was neither locked nor written');
-- The channel's place in the rotation, its count and its wait: what a write
-- of the fast path would change.
CREATE FUNCTION pg_temp.place_of(p_channel text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT concat_ws(' ', c.next_at, c.turn, c.wait_at, c.last_served_at, c.num_locked)
    FROM lonnymq.channel AS c WHERE c.name = p_channel
$$;
SELECT pg_temp.place_of('solo') AS solo_place \gset
SELECT is(pg_temp.take(5), 'solo:c,solo:d', 'a batch from the only eligible channel, in order');
-- 0.7.0: a batch raises its channel's floor (channel.floor_at), at most
-- once a second: then, and only then, it writes the row, and only that.
SELECT is(
    (SELECT pg_temp.place_of('solo') || ' raised ' || (c.floor_checked_at IS NOT NULL)
     FROM lonnymq.channel AS c WHERE c.name = 'solo'),
    :'solo_place' || ' raised true',
    'the batch wrote the channel row only to raise its floor'
);
-- As if the floor had just been raised: the batches below come within the
-- second, and must not write the row.
UPDATE lonnymq.channel SET floor_checked_at = pg_temp.lmq_now() + 60000 WHERE name = 'solo';
SELECT pg_temp.row_of('solo') AS solo_row \gset

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
SELECT is(pg_temp.row_of('solo'), :'solo_row', 'still without touching the channel row');

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
-- A channel given a limit is not served by the fast path: max_concurrency
-- holds.
SELECT lonnymq.channel_set('limited', p_max_concurrency => 1);
SELECT lonnymq.message_create('limited', 'm1');
SELECT lonnymq.message_create('limited', 'm2');
SELECT is(pg_temp.take(5), 'limited:m1', 'max_concurrency 1: one message of a batch of 5');

-- An expired lock past max_attempts met by the fast path goes to the dead
-- letters (the general way), and the batch gets the next message.
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
