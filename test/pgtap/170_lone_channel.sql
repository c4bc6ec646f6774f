\ir include/setup.psql
-- A channel without limits has no row (0.11.0: its messages carry its name
-- and the hash of it), so serving it writes nothing but its messages: no
-- channel row is created, locked or written by its producers or its
-- consumers, whatever they do (create, take one or a batch, complete,
-- recover an expired lock, defer, fail), and any number of consumers take
-- from it as from a plain SKIP LOCKED table (test_concurrency.py runs
-- eight).  Alone or beside other channels, it gets one delivery per round.
SELECT plan(21);

CREATE FUNCTION pg_temp.take(p_limit integer DEFAULT 1, p_lock_ms bigint DEFAULT 60000)
RETURNS text
LANGUAGE sql
AS $$
    SELECT string_agg(d.channel || ':' || convert_from(d.content, 'UTF8'), ',' ORDER BY d.ord)
    FROM lonnymq.message_dequeue(p_lock_ms, p_limit)
        WITH ORDINALITY AS d (id, channel, content, state, num_attempts, dequeue_at, is_recovered, ord)
$$;

-- Rows inserted, updated or deleted so far by this transaction in every
-- table of lonnymq but message.
CREATE FUNCTION pg_temp.other_writes()
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_xact_user_tables
    WHERE schemaname = 'lonnymq' AND relname <> 'message'
$$;

-- ---------------------------------------------------------------- one channel
SELECT pg_temp.other_writes() AS writes \gset
SELECT lonnymq.message_create('solo', 'a');
SELECT lonnymq.message_create('solo', 'b');
SELECT lonnymq.message_create('solo', 'c');
SELECT lonnymq.message_create('solo', 'd');
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel = 'solo' AND m.channel_id = lonnymq._channel_id('solo')),
    4::bigint,
    'its messages carry its name and the hash of it'
);
SELECT is(pg_temp.take(), 'solo:a', 'a is delivered');
SELECT is(pg_temp.take(), 'solo:b', 'b');
SELECT is(pg_temp.take(5), 'solo:c,solo:d', 'a batch, in order');
SELECT is((SELECT count(*) FROM lonnymq.channel WHERE name = 'solo'), 0::bigint, 'the channel has no row');
SELECT is(pg_temp.other_writes() - :writes, 0::bigint,
    'its producer and its consumers wrote nothing but its messages');

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
-- A defer and a retry put the message back; a complete ends it.
SELECT is(lonnymq.message_defer(:short_id, 2), TRUE, 'deferred');
SELECT d.id AS s_id, d.num_attempts AS s_tok FROM lonnymq.message_dequeue(60000) AS d \gset
SELECT is(lonnymq.message_fail(:s_id, :s_tok, 'once'), 'retry', 'failed, retried');
SELECT lonnymq.message_create('solo', 'last') AS last_id \gset
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000) AS d;
SELECT is(
    (SELECT count(*) FROM lonnymq.message AS m WHERE m.id = :last_id),
    0::bigint,
    'completed'
);
SELECT is(
    (pg_temp.other_writes() - :writes) || ' ' || (SELECT count(*) FROM lonnymq.channel),
    '0 0',
    'none of these wrote anything but messages, and no channel row exists'
);

-- ---------------------------------------------------------------- rounds
-- A second channel becomes ready: one delivery each per round.  (solo's
-- two messages take two rounds; other joins the round of s1, or the next
-- when its place in that one has passed, before s2 either way.)
SELECT lonnymq.message_cancel(m.id) FROM lonnymq.message AS m WHERE m.channel = 'solo' AND NOT m.is_locked;
SELECT lonnymq.message_create('solo', 's1');
SELECT lonnymq.message_create('solo', 's2');
SELECT lonnymq.message_create('other', 'o1');
SELECT lonnymq.message_create('other', 'o2');
SELECT is(
    ARRAY[pg_temp.take(), pg_temp.take(), pg_temp.take(), pg_temp.take()],
    ARRAY['solo:s1', 'other:o1', 'solo:s2', 'other:o2'],
    'round-robin'
);
SELECT is(pg_temp.other_writes() - :writes, 0::bigint, 'still without a write beside the messages');

-- ---------------------------------------------------------------- limits and dead letters
-- A channel given a limit has a row, which admission writes: max_concurrency
-- holds.
SELECT lonnymq.channel_set('limited', p_max_concurrency => 1);
SELECT lonnymq.message_create('limited', 'm1');
SELECT lonnymq.message_create('limited', 'm2');
SELECT is(pg_temp.take(5), 'limited:m1', 'max_concurrency 1: one message of a batch of 5');
SELECT is((SELECT num_admitted FROM lonnymq.channel WHERE name = 'limited'), 1, 'its row counts it');

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
