\ir include/setup.psql
SELECT plan(14);

-- Oracle: instants built from integer milliseconds with exact interval
-- arithmetic (microsecond integers), so the expected value is known exactly.
CREATE TEMP TABLE instants AS
SELECT DISTINCT ms
FROM (
    -- every millisecond around minute boundaries, and around second
    -- boundaries, on both sides of 1970
    SELECT b * 60000 + d AS ms
    FROM generate_series(-30, 30) AS b, generate_series(-1001, 1001, 7) AS d
    UNION ALL
    SELECT b * 1000 + d
    FROM generate_series(-50, 50) AS b, unnest(ARRAY[-1000, -999, -501, -500, -1, 0, 1, 499, 500, 999]) AS d
    UNION ALL
    -- spread over ±100 years at odd offsets (seconds fields 0..59)
    SELECT (g::bigint * 7919 * 60000 + (g % 60) * 1000 + (g * 37) % 1000) * CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END
    FROM generate_series(1, 6000) AS g
    UNION ALL
    SELECT 1795000000000 + g * 60000 + (g * 13) % 60000 FROM generate_series(0, 2000) AS g
) AS s;

SELECT cmp_ok((SELECT count(*) FROM instants), '>=', 10000::bigint, 'at least 10,000 distinct instants are checked');

SELECT is(
    (SELECT count(*) FROM instants
     WHERE lonnymq.to_epoch(timestamptz 'epoch' + ms * interval '1 millisecond') <> ms),
    0::bigint,
    'to_epoch is exact at whole milliseconds (minute and second boundaries, before and after 1970)'
);

SELECT is(
    (SELECT count(*) FROM instants
     WHERE lonnymq.to_epoch(timestamptz 'epoch' + ms * interval '1 millisecond' + interval '999 microseconds') <> ms),
    0::bigint,
    'to_epoch floors sub-millisecond parts (999 us later is the same millisecond)'
);

SELECT is(
    (SELECT count(*) FROM instants
     WHERE lonnymq.to_epoch(timestamptz 'epoch' + ms * interval '1 millisecond' - interval '1 microsecond') <> ms - 1),
    0::bigint,
    'to_epoch floors toward minus infinity (1 us earlier is the previous millisecond, negative epochs too)'
);

-- The flawed formula of an earlier queue (whole seconds * 1000 + the
-- MILLISECOND field, which already holds the seconds of the minute) is off
-- by up to a minute: make sure these instants would catch it.
SELECT cmp_ok(
    (SELECT count(*) FROM instants
     WHERE extract(EPOCH FROM timestamptz 'epoch' + ms * interval '1 millisecond')::bigint * 1000
         + extract(MILLISECOND FROM timestamptz 'epoch' + ms * interval '1 millisecond')::bigint <> ms),
    '>', 1000::bigint,
    'the instants distinguish to_epoch from the seconds*1000 + MILLISECOND formula'
);

SELECT is(lonnymq.to_epoch(timestamptz '2026-11-22 12:34:56.789+00'), 1795350896789::bigint, 'a known instant');
SELECT is(lonnymq.to_epoch(timestamptz '1969-12-31 23:59:59.999+00'), -1::bigint, 'one millisecond before the epoch is -1');
SELECT is(lonnymq.to_epoch(NULL), NULL::bigint, 'NULL gives NULL');
CREATE FUNCTION pg_temp.plan_text(p_query text)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_line text;
    v_plan text := '';
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN (VERBOSE) ' || p_query LOOP
        v_plan := v_plan || v_line || E'\n';
    END LOOP;
    RETURN v_plan;
END;
$$;
SELECT unalike(
    pg_temp.plan_text('SELECT lonnymq.to_epoch(now())'),
    '%lonnymq.to_epoch(%',
    'to_epoch(now()) is inlined by the planner (no function call per row)'
);
SELECT unalike(
    pg_temp.plan_text('SELECT lonnymq.to_epoch(g) FROM generate_series(now(), now() + interval ''1 day'', interval ''1 hour'') AS g'),
    '%lonnymq.to_epoch(%',
    'to_epoch of a column is inlined by the planner'
);
-- A volatile argument is not inlined (to_epoch reads it twice) but is
-- evaluated once: the answer is the clock's.
SELECT cmp_ok(
    abs(lonnymq.to_epoch(clock_timestamp()) - (extract(EPOCH FROM clock_timestamp()) * 1000)::bigint),
    '<', 1000::bigint,
    'to_epoch(clock_timestamp()) reads the clock'
);
-- The same SQLSTATE and message on every version (PostgreSQL 17 made the
-- difference of infinite timestamps an infinite interval).
SELECT throws_ok($$ SELECT lonnymq.to_epoch('infinity') $$, '22008',
    'interval out of range', 'infinity raises 22008');
SELECT throws_ok($$ SELECT lonnymq.to_epoch('-infinity') $$, '22008',
    'interval out of range', '-infinity raises 22008');
SELECT throws_ok($$ SELECT lonnymq.to_epoch(t) FROM (VALUES (now()), ('infinity')) AS v (t) $$, '22008',
    'interval out of range', 'infinity raises 22008 from a column too (the inlined form)');

SELECT * FROM finish();
ROLLBACK;
