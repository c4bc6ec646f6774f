\ir include/setup.psql
-- Periodic messages: schedule_set, schedule_drop, tick() and the promotion
-- of a schedule's pending occurrence (_schedule_next).
SELECT plan(69);

-- Messages a channel's schedules made: "content@dequeue_at" in id order
-- (their pending occurrences aside).
CREATE FUNCTION pg_temp.msgs(p_channel text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT string_agg(convert_from(m.content, 'UTF8') || '@' || m.dequeue_at, ',' ORDER BY m.id)
    FROM lonnymq.message AS m
    WHERE m.channel = p_channel AND m.schedule IS NULL
$$;

-- How many messages the channel holds, its schedules' occurrences aside.
CREATE FUNCTION pg_temp.made(p_channel text)
RETURNS bigint
LANGUAGE sql
AS $$
    SELECT count(*) FROM lonnymq.message AS m WHERE m.channel = p_channel AND m.schedule IS NULL
$$;

-- A schedule's pending occurrence: "channel content@dequeue_at state",
-- when the schedule points at it; NULL: none.
CREATE FUNCTION pg_temp.occurrence(p_name text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT m.channel || ' ' || convert_from(m.content, 'UTF8') || '@' || m.dequeue_at || ' ' || lonnymq._message_state(m)
    FROM lonnymq.schedule AS s
    JOIN lonnymq.message AS m ON m.id = s.occurrence_id AND m.schedule = s.name
    WHERE s.name = p_name
$$;

-- A schedule's row: "next_at-start_at num_runs num_missed aligned".
CREATE FUNCTION pg_temp.sched(p_name text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT (s.next_at - s.start_at) || ' ' || s.num_runs || ' ' || s.num_missed || ' '
        || CASE WHEN (s.next_at - s.start_at) % s.every_ms = 0 THEN 'aligned' ELSE 'NOT aligned' END
    FROM lonnymq.schedule AS s WHERE s.name = p_name
$$;

-- ---------------------------------------------------------------- one message per period (tick)
SELECT pg_temp.lmq_now() - 1000 AS h_start \gset
SELECT lonnymq.schedule_set('hourly', 'h', 'tick', 3600000, :h_start);
SELECT is(
    (SELECT concat_ws(' ', channel, convert_from(content, 'UTF8'), every_ms, start_at = :h_start, next_at = :h_start, num_runs, last_run_at IS NULL)
     FROM lonnymq.schedule WHERE name = 'hourly'),
    'h tick 3600000 t t 0 t',
    'schedule_set stores the schedule, its first period at start_at'
);
SELECT is(pg_temp.made('h'), 0::bigint, 'schedule_set itself creates no message');
SELECT is(pg_temp.occurrence('hourly'), 'h tick@' || :h_start || ' scheduled',
    'but its pending occurrence, a scheduled message at start_at');
SELECT is(lonnymq.message_cancel((SELECT occurrence_id FROM lonnymq.schedule WHERE name = 'hourly')), FALSE,
    'message_cancel refuses the occurrence (schedule_drop drops it)');
SELECT is(lonnymq.channel_drop('h'), FALSE, 'a channel that holds only an occurrence has nothing to drop');
SELECT is(lonnymq.tick(), 1, 'tick() promotes the due occurrence: 1');
SELECT is(pg_temp.msgs('h'), 'tick@' || :h_start, 'one message, due at the period boundary');
SELECT is(lonnymq.tick(), 0, 'a second tick() in the same period: 0');
SELECT is(pg_temp.made('h'), 1::bigint, 'still one message');
SELECT is(pg_temp.sched('hourly'), '3600000 1 0 aligned', 'next_at moved one period on');
SELECT is(pg_temp.occurrence('hourly'), 'h tick@' || (:h_start + 3600000) || ' scheduled',
    'and the following occurrence is scheduled at it');
SELECT ok((SELECT created_at BETWEEN lonnymq.to_epoch(now()) AND pg_temp.lmq_now() FROM lonnymq.message WHERE channel = 'h' AND schedule IS NULL),
    'the message was created at its promotion');
SELECT ok((SELECT last_run_at BETWEEN lonnymq.to_epoch(now()) AND pg_temp.lmq_now() FROM lonnymq.schedule WHERE name = 'hourly'),
    'last_run_at is the time of the run');
SELECT is(pg_temp.lmq_take(), 'h:tick', 'the message is delivered like any other');

-- ---------------------------------------------------------------- message_dequeue materialises too
SELECT lonnymq.schedule_set('deq', 'dq', 'from-dequeue', 3600000, pg_temp.lmq_now() - 10);
CREATE TEMP TABLE deq_got AS SELECT * FROM lonnymq.message_dequeue(60000, 10);
INSERT INTO deq_got SELECT * FROM lonnymq.message_dequeue(60000, 10);
INSERT INTO deq_got SELECT * FROM lonnymq.message_dequeue(60000, 10);
SELECT is(pg_temp.made('dq'), 1::bigint, 'message_dequeue promotes a due occurrence, once');
SELECT is((SELECT string_agg(channel || ':' || convert_from(content, 'UTF8'), ',') FROM deq_got), 'dq:from-dequeue',
    'and it is delivered');
SELECT is(lonnymq.tick(), 0, 'tick() then finds nothing due');

-- A worker dequeuing with p_channel from the channel a schedule feeds, before
-- that channel exists.
SELECT lonnymq.schedule_set('deq2', 'dq2', 'for-worker', 3600000, pg_temp.lmq_now() - 10);
CREATE TEMP TABLE deq2_got AS SELECT * FROM lonnymq.message_dequeue(60000, 10, 'dq2');
SELECT is(pg_temp.made('dq2'), 1::bigint, 'dequeue with p_channel promotes the occurrence of the schedule feeding it, even into a new channel');
INSERT INTO deq2_got SELECT * FROM lonnymq.message_dequeue(60000, 10, 'dq2');
SELECT is((SELECT string_agg(channel || ':' || convert_from(content, 'UTF8'), ',') FROM deq2_got), 'dq2:for-worker',
    'and that worker gets the message');

-- ---------------------------------------------------------------- consecutive periods
SELECT pg_temp.lmq_now() - 1 AS p_start \gset
SELECT lonnymq.schedule_set('fast', 'f', 'f', 300, :p_start);
SELECT is(lonnymq.tick(), 1, 'period 1');
SELECT is(lonnymq.tick(), 0, 'nothing more in period 1');
SELECT pg_sleep(greatest(0, :p_start + 305 - pg_temp.lmq_now()) / 1000.0);
SELECT is(lonnymq.tick(), 1, 'period 2');
SELECT is(lonnymq.tick(), 0, 'nothing more in period 2');
SELECT is(pg_temp.msgs('f'), 'f@' || :p_start || ',f@' || (:p_start + 300), 'one message per period, at its boundary');
SELECT is(pg_temp.sched('fast'), '600 2 0 aligned', 'two runs, nothing missed');

-- A start in the future: nothing before it.
SELECT lonnymq.schedule_set('later', 'lt', 'x', 1000, pg_temp.lmq_now() + 3600000);
SELECT is(lonnymq.tick(), 0, 'a schedule starting in an hour is not due');
SELECT is(pg_temp.made('lt'), 0::bigint, 'and has created nothing');
SELECT is((SELECT s.ready || '/' || s.scheduled FROM lonnymq.channel_stats('lt') AS s), '0/1',
    'channel_stats counts its pending occurrence among the scheduled messages');
DELETE FROM lonnymq.message WHERE schedule = 'later';
SELECT lonnymq.schedule_set('later', 'lt', 'x', 1000);
SELECT is(pg_temp.occurrence('later'), 'lt x@' || (SELECT next_at FROM lonnymq.schedule WHERE name = 'later') || ' scheduled',
    'schedule_set gives a schedule whose occurrence was deleted by hand a new one, at its next boundary');

-- ---------------------------------------------------------------- catch-up
-- Started 10.5 periods ago: 11 boundaries are due, one message is created
-- for the latest, the 10 others are counted as missed.
SELECT pg_temp.lmq_now() - 10500 AS c_start \gset
SELECT lonnymq.schedule_set('late', 'l', 'l', 1000, :c_start);
SELECT is(lonnymq.tick(), 1, 'several missed periods: one message');
SELECT is(pg_temp.msgs('l'), 'l@' || (:c_start + 10000), 'at the latest missed boundary');
SELECT is(pg_temp.sched('late'), '11000 1 10 aligned', 'num_missed 10, next_at the next boundary start_at + 11 * every_ms');
SELECT is(lonnymq.tick(), 0, 'nothing more is due');

-- ---------------------------------------------------------------- replacing a schedule
SELECT next_at AS h_next FROM lonnymq.schedule WHERE name = 'hourly' \gset
SELECT lonnymq.schedule_set('hourly', 'h', 'tock', 3600000, :h_start);
SELECT is((SELECT next_at FROM lonnymq.schedule WHERE name = 'hourly'), :h_next::bigint,
    'the same period and start: the position is kept');
SELECT is((SELECT convert_from(content, 'UTF8') FROM lonnymq.schedule WHERE name = 'hourly'), 'tock', 'with the new content');
SELECT lonnymq.schedule_set('hourly', 'h', 'tock', 3600000);
SELECT is((SELECT next_at FROM lonnymq.schedule WHERE name = 'hourly'), :h_next::bigint,
    'the same period (start NULL): the schedule keeps its position');
SELECT is(pg_temp.sched('hourly'), '3600000 1 0 aligned', 'next_at still start_at + k * every_ms');
SELECT is(lonnymq.tick(), 0, 'and nothing is due');
SELECT lonnymq.schedule_set('hourly', 'h', 'tock', 3600000, :h_start);
SELECT is((SELECT next_at FROM lonnymq.schedule WHERE name = 'hourly'), :h_next::bigint,
    'setting the original start again still keeps the position (no second message for a produced period)');
SELECT lonnymq.schedule_set('hourly', 'h', 'tock', 3600000, :h_start + 1);
SELECT is((SELECT next_at FROM lonnymq.schedule WHERE name = 'hourly'), :h_start + 1,
    'a new start: it restarts from there');
SELECT pg_temp.lmq_now() AS before_set \gset
SELECT lonnymq.schedule_set('hourly', 'h', 'tock', 7200000);
SELECT ok(
    (SELECT next_at = start_at AND start_at BETWEEN :before_set AND pg_temp.lmq_now() AND num_runs = 1 FROM lonnymq.schedule WHERE name = 'hourly'),
    'a new period restarts it from now'
);
SELECT ok((SELECT pg_temp.occurrence('hourly') = 'h tock@' || next_at || ' scheduled' FROM lonnymq.schedule WHERE name = 'hourly'),
    'its occurrence follows: the new content, at the new start');
SELECT is(lonnymq.tick(), 1, 'so it is due at once');
SELECT is((SELECT string_agg(convert_from(m.content, 'UTF8'), ',' ORDER BY m.id) FROM lonnymq.message AS m WHERE m.channel = 'h' AND m.schedule IS NULL),
    'tick,tock', 'with its new content');
SELECT lonnymq.schedule_set('hourly', 'h2', 'moved', 7200000);
SELECT is(split_part(pg_temp.occurrence('hourly'), ' ', 1), 'h2', 'a new channel: the occurrence moves with it');
SELECT is(
    (SELECT count(*) FROM lonnymq.message WHERE schedule = 'hourly'), 1::bigint,
    'one occurrence per schedule, however often it is set'
);

-- ---------------------------------------------------------------- max_size
SELECT lonnymq.channel_set('full', p_max_size => 1);
SELECT lonnymq.message_create('full', 'held');
SELECT lonnymq.schedule_set('into-full', 'full', 'x', 3600000, pg_temp.lmq_now() - 10);
SELECT is((SELECT num_created FROM lonnymq.channel_quota WHERE channel_id = lonnymq._channel_id('full')), 1::bigint,
    'max_size does not count the pending occurrence');
SELECT is(lonnymq.tick(), 0, 'a full channel misses the period: nothing created');
SELECT is(pg_temp.made('full'), 1::bigint, 'the channel still holds one');
SELECT is(pg_temp.sched('into-full'), '3600000 1 0 aligned', 'and the schedule moved on to the next period');
SELECT is(pg_temp.occurrence('into-full'), 'full x@' || (SELECT next_at FROM lonnymq.schedule WHERE name = 'into-full') || ' scheduled',
    'with its following occurrence');

-- ---------------------------------------------------------------- drop
SELECT is(lonnymq.schedule_drop('hourly'), TRUE, 'schedule_drop: true');
SELECT is((SELECT count(*) FROM lonnymq.message WHERE schedule = 'hourly'), 0::bigint, 'its occurrence goes with it');
SELECT is(lonnymq.schedule_drop('hourly'), FALSE, 'again: false');
SELECT is(lonnymq.schedule_drop('never-was'), FALSE, 'an unknown schedule: false');
SELECT is(pg_temp.lmq_count('h'), 2::bigint, 'the messages it created stay');
-- A channel dropped with its messages keeps its schedule's occurrence.
SELECT lonnymq.schedule_set('into-dropped', 'dropped', 'y', 3600000, pg_temp.lmq_now() + 3600000);
SELECT lonnymq.message_create('dropped', 'other');
SELECT is(lonnymq.channel_drop('dropped', TRUE), TRUE, 'channel_drop with p_purge');
SELECT is(pg_temp.occurrence('into-dropped'), 'dropped y@' || (SELECT next_at FROM lonnymq.schedule WHERE name = 'into-dropped') || ' scheduled',
    'deletes its messages but not the occurrence: the next period creates the channel again');

-- ---------------------------------------------------------------- bad input
CREATE TEMP TABLE sched_before AS SELECT s::text AS r FROM lonnymq.schedule AS s;
SELECT throws_ok($$ SELECT lonnymq.schedule_set(NULL, 'c', 'x', 1000) $$, '22004', NULL, 'NULL name: 22004');
SELECT throws_ok($$ SELECT lonnymq.schedule_set('late', 'c', 'x', 0) $$, '22023', NULL, 'every_ms 0: 22023');
SELECT throws_ok($$ SELECT lonnymq.schedule_set('late', '', 'x', 1000) $$, '22023', NULL, 'an empty channel name: 22023');
SELECT throws_ok($$ SELECT lonnymq.schedule_set('late', 'c', NULL, 1000) $$, '22004', NULL, 'NULL content: 22004');
SELECT throws_ok(
    $$ SELECT lonnymq.schedule_set('late', 'c', 'x', 60000, -9223372036854775807) $$, '22023', NULL,
    'a start before year 1: 22023 (0.7.0 stored it, and then every dequeue failed with 22003)'
);
SELECT throws_ok(
    $$ SELECT lonnymq.schedule_set('late', 'c', 'x', 1, 9223372036854775807) $$, '22023', NULL,
    'a start after year 9999: 22023'
);
SELECT is(
    (SELECT string_agg(s::text, ',' ORDER BY s::text) FROM lonnymq.schedule AS s),
    (SELECT string_agg(r, ',' ORDER BY r) FROM sched_before),
    'refused calls change no schedule'
);

-- A schedule that 0.7.0 stored at the very beginning of bigint (its upgrade
-- keeps it; 0.13.1's sets its set_at to the clock, as a due schedule's;
-- 0.15.0's gives it its occurrence at next_at, created at set_at):
-- promoting it overflows nothing, and the dequeues that meet it go on.
WITH o AS (
    INSERT INTO lonnymq.message (channel_id, channel, dequeue_at, created_at, content, schedule)
    VALUES (lonnymq._channel_id('anc'), 'anc', -9223372036854775807, lonnymq._clock_ms(), 'x', 'ancient')
    RETURNING id
)
INSERT INTO lonnymq.schedule (name, channel, content, every_ms, start_at, next_at, created_at, set_at, occurrence_id)
SELECT 'ancient', 'anc', 'x', 1, -9223372036854775807, -9223372036854775807, 0, lonnymq._clock_ms(), o.id FROM o;
SELECT lives_ok($$ SELECT * FROM lonnymq.message_dequeue(60000, 1) $$, 'a dequeue meets it without error');
SELECT is(
    pg_temp.made('anc'),
    1::bigint,
    'one message for every missed period'
);
SELECT ok(
    (SELECT s.next_at > pg_temp.lmq_now() - 1000 AND s.num_missed > 0 FROM lonnymq.schedule AS s WHERE s.name = 'ancient'),
    'the schedule is caught up, its missed periods counted'
);

-- An occurrence whose schedule is gone (a row deleted by hand) is not left
-- due for ever: its promotion deletes it.
DELETE FROM lonnymq.schedule WHERE name = 'ancient';
SELECT pg_sleep(0.005);
SELECT lonnymq.tick();
SELECT is((SELECT count(*) FROM lonnymq.message WHERE schedule = 'ancient'), 0::bigint,
    'a stray occurrence is deleted when it comes due');

SELECT * FROM finish();
ROLLBACK;
