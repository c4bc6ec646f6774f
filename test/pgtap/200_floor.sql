\ir include/setup.psql
-- A channel's floor (channel_floor), where dequeues start their walk of its
-- messages.  A dequeue raises it when it is more than 20 ms behind to the
-- channel's first message, never above the clock less 20 ms; whoever puts a
-- message below it lowers it (a lowering row), and a later raise takes the
-- lowered messages into account and deletes the rows it supersedes.  A
-- message below the floor must never be passed over.
SELECT plan(19);

CREATE FUNCTION pg_temp.floor_of(p_channel text)
RETURNS bigint
LANGUAGE sql
AS $$ SELECT lonnymq._channel_scan_from(c.id) FROM lonnymq.channel AS c WHERE c.name = p_channel $$;

-- The lowering rows since the last raise.
CREATE FUNCTION pg_temp.marks_of(p_channel text)
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT count(*)
    FROM lonnymq.channel_floor AS f
    INNER JOIN lonnymq.channel AS c ON c.id = f.channel_id
    WHERE c.name = p_channel AND NOT f.is_raise
$$;

-- The next dequeue may raise the floor, as if the last raise was long ago:
-- the floor two seconds lower (lowering a floor is always safe: walks start
-- earlier).
CREATE FUNCTION pg_temp.raise_next(p_channel text)
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO lonnymq.channel_floor (channel_id, floor_at, is_raise)
    SELECT c.id, lonnymq._channel_scan_from(c.id) - 2000, FALSE
    FROM lonnymq.channel AS c
    WHERE c.name = p_channel
$$;

-- Dequeue up to p_limit and return the contents in delivery order.
CREATE FUNCTION pg_temp.take(p_limit integer)
RETURNS text
LANGUAGE sql
AS $$
    SELECT string_agg(convert_from(d.content, 'UTF8'), ',' ORDER BY d.ord)
    FROM lonnymq.message_dequeue(60000, p_limit)
        WITH ORDINALITY AS d (id, channel, content, state, num_attempts, dequeue_at, is_recovered, ord)
$$;

SELECT lonnymq.to_epoch(now()) AS t0 \gset

-- ---------------------------------------------------------------- raising
-- Six messages dated a minute ago.
SELECT count(*) FROM lonnymq.message_create_batch(
    'f', ARRAY['a', 'b', 'c', 'd', 'e', 'g']::bytea[], array_fill(:t0 - 60000, ARRAY[6])
);
SELECT is(pg_temp.take(2), 'a,b', 'a new channel: the first batch');
SELECT is(pg_temp.floor_of('f'), :t0 - 60000, 'it raised the floor to the first message (c, not yet delivered)');
SELECT is(pg_temp.take(2), 'c,d', 'the next batch');
SELECT is(pg_temp.floor_of('f'), :t0 - 60000, 'the floor is not behind: not raised again');

-- The head moves on: the next raise follows it.
SELECT lonnymq.message_create('f', 'h', :t0 - 30000);
SELECT is(pg_temp.take(2), 'e,g', 'the rest of the first six');
SELECT pg_temp.raise_next('f');
SELECT is(pg_temp.take(1), 'h', 'h: one message, the single-message way');
SELECT lonnymq.message_create('f', 'i', :t0 - 30000);
SELECT lonnymq.message_create('f', 'j', :t0 - 30000);
SELECT is(pg_temp.take(1) || ',' || pg_temp.take(2), 'i,j', 'a batch after one message');
SELECT is(
    pg_temp.floor_of('f') BETWEEN :t0 - 60000 AND pg_temp.lmq_now() - 20,
    TRUE,
    'a raise never puts the floor above the clock less 20 ms'
);

-- ---------------------------------------------------------------- below the floor
-- The floor is now j's date, half a minute ago: messages dated earlier are
-- below it.
SELECT pg_temp.marks_of('f') AS lowered0 \gset
SELECT lonnymq.message_create('f', 'k', :t0 - 40000);
SELECT lonnymq.message_create('f', 'l', :t0 - 40000);
SELECT is(pg_temp.marks_of('f') - :lowered0, 1::bigint, 'messages dated before the floor lower it: one row');
SELECT is(pg_temp.take(5), 'k,l', 'a batch delivers them');
SELECT is(pg_temp.floor_of('f'), :t0 - 40000, 'from the floor they lowered');
SELECT pg_temp.floor_of('f') AS floor1 \gset
SELECT pg_temp.marks_of('f') AS lowered1 \gset
SELECT lonnymq.message_create('f', 'above', :floor1);
SELECT is(pg_temp.marks_of('f') - :lowered1, 0::bigint, 'a message at the floor lowers nothing');
SELECT lonnymq.message_create('f', 'urgent', -5);
SELECT is(pg_temp.marks_of('f') - :lowered1, 1::bigint, 'a message below it (priority) lowers it');
SELECT is(pg_temp.take(2), 'urgent,above', 'the next batch delivers it first');

-- A deferred message below the floor, and a raise that sees a lowered
-- message it has not delivered: the floor goes down to it.
SELECT lonnymq.message_create('f', 'p1', 100);
SELECT lonnymq.message_create('f', 'p2', 200);
SELECT lonnymq.message_create('f', 'p3', 300);
SELECT pg_temp.raise_next('f');
SELECT is(pg_temp.take(2), 'p1,p2', 'two of three messages below the floor');
SELECT is(
    pg_temp.floor_of('f') || ' ' || pg_temp.marks_of('f'),
    '300 0',
    'the raise walked from the lowered floor: the floor went down to p3, the lowering rows are gone'
);
SELECT d.id AS p3_id, d.num_attempts AS p3_token FROM lonnymq.message_dequeue(60000, 1) AS d \gset
SELECT lonnymq.message_defer(:p3_id, :p3_token, 50);
SELECT is(pg_temp.marks_of('f'), 1::bigint, 'deferred below the floor: a lowering');
SELECT lonnymq.message_create('f', 'q', :t0);
SELECT is(pg_temp.take(2), 'p3,q', 'the deferred message first');

-- ---------------------------------------------------------------- drop
SELECT lonnymq.message_create('f', 'r', 1);
SELECT lonnymq.channel_drop('f', TRUE);
SELECT is(
    (SELECT count(*) FROM lonnymq.channel_floor),
    0::bigint,
    'channel_drop deletes the channel''s floor'
);

SELECT * FROM finish();
ROLLBACK;
