\ir include/setup.psql
-- A channel's floor (channel.floor_at), where dequeues start their walk of
-- its messages.  A dequeue raises it when it is more than a second behind
-- (about once a second while consumers keep up) to the channel's first
-- message, never above one second ago; whoever puts a message below it
-- leaves a channel_floor_mark, and dequeues then walk the channel from its
-- beginning until the next raise, which takes the marked messages into
-- account (the floor can go down) and deletes the marks.  A message below
-- the floor must never be passed over.
SELECT plan(19);

CREATE FUNCTION pg_temp.floor_of(p_channel text)
RETURNS bigint
LANGUAGE sql
AS $$ SELECT c.floor_at FROM lonnymq.channel AS c WHERE c.name = p_channel $$;

CREATE FUNCTION pg_temp.marks_of(p_channel text)
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT count(*)
    FROM lonnymq.channel_floor_mark AS k
    INNER JOIN lonnymq.channel AS c ON c.id = k.channel_id
    WHERE c.name = p_channel
$$;

-- The next dequeue may raise the floor, as if the last raise was long ago:
-- the floor two seconds lower (lowering a floor is always safe: walks start
-- earlier).
CREATE FUNCTION pg_temp.raise_next(p_channel text)
RETURNS void
LANGUAGE sql
AS $$ UPDATE lonnymq.channel SET floor_at = floor_at - 2000 WHERE name = p_channel $$;

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
SELECT is(pg_temp.floor_of('f'), :t0 - 60000, 'the floor is less than a second behind: not raised again');

-- The head moves on: the next raise follows it.
SELECT lonnymq.message_create('f', 'h', :t0 - 30000);
SELECT is(pg_temp.take(2), 'e,g', 'the rest of the first six');
SELECT pg_temp.raise_next('f');
SELECT is(pg_temp.take(1), 'h', 'h: one message, the single-message way');
SELECT lonnymq.message_create('f', 'i', :t0 - 30000);
SELECT lonnymq.message_create('f', 'j', :t0 - 30000);
SELECT is(pg_temp.take(1) || ',' || pg_temp.take(2), 'i,j', 'a batch after one message');
SELECT is(
    pg_temp.floor_of('f') BETWEEN :t0 - 60000 AND pg_temp.lmq_now() - 1000,
    TRUE,
    'a raise never puts the floor above one second ago'
);

-- ---------------------------------------------------------------- below the floor
-- The floor is now j's date, half a minute ago: messages dated earlier are
-- below it.
SELECT lonnymq.message_create('f', 'k', :t0 - 40000);
SELECT lonnymq.message_create('f', 'l', :t0 - 40000);
SELECT is(pg_temp.marks_of('f'), 1::bigint, 'messages dated before the floor: one mark');
SELECT is(pg_temp.take(5), 'k,l', 'a batch delivers them');
SELECT is(pg_temp.marks_of('f'), 0::bigint, 'and its raise deleted the mark');
SELECT pg_temp.floor_of('f') AS floor1 \gset
SELECT lonnymq.message_create('f', 'above', :floor1);
SELECT is(pg_temp.marks_of('f'), 0::bigint, 'a message at the floor leaves no mark');
SELECT lonnymq.message_create('f', 'urgent', -5);
SELECT is(pg_temp.marks_of('f'), 1::bigint, 'a message below it (priority) leaves a mark');
SELECT is(pg_temp.take(2), 'urgent,above', 'the next batch delivers it first');

-- A deferred message below the floor, and a raise that sees a marked message
-- it has not delivered: the floor goes down to it.
SELECT lonnymq.message_create('f', 'p1', 100);
SELECT lonnymq.message_create('f', 'p2', 200);
SELECT lonnymq.message_create('f', 'p3', 300);
SELECT pg_temp.raise_next('f');
SELECT is(pg_temp.take(2), 'p1,p2', 'two of three marked messages');
SELECT is(
    pg_temp.floor_of('f') || ' ' || pg_temp.marks_of('f'),
    '300 0',
    'the raise walked from the beginning: the floor went down to p3, the marks are gone'
);
SELECT d.id AS p3_id, d.num_attempts AS p3_token FROM lonnymq.message_dequeue(60000, 1) AS d \gset
SELECT lonnymq.message_defer(:p3_id, :p3_token, 50);
SELECT is(pg_temp.marks_of('f'), 1::bigint, 'deferred below the floor: a mark');
SELECT lonnymq.message_create('f', 'q', :t0);
SELECT is(pg_temp.take(2), 'p3,q', 'the deferred message first');

-- ---------------------------------------------------------------- drop
SELECT lonnymq.message_create('f', 'r', 1);
SELECT lonnymq.channel_drop('f', TRUE);
SELECT is(
    (SELECT count(*) FROM lonnymq.channel_floor_mark),
    0::bigint,
    'channel_drop deletes the channel''s marks'
);

SELECT * FROM finish();
ROLLBACK;
