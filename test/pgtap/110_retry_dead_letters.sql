\ir include/setup.psql
-- message_fail (retry policy, backoff), dead letters (from message_fail and
-- from expired locks), dead_letter_redrive.
SELECT plan(74);

-- Deliver one message of a channel, its lock p_lock_ms; returns "id:num_attempts".
CREATE FUNCTION pg_temp.deliver(p_channel text, p_lock_ms bigint DEFAULT 60000)
RETURNS text
LANGUAGE sql
AS $$
    SELECT d.id || ':' || d.num_attempts FROM lonnymq.message_dequeue(p_lock_ms, 1, p_channel) AS d
$$;

-- Deliver and fail p_times in a row; the results of message_fail, comma-separated.
CREATE FUNCTION pg_temp.fail_times(p_channel text, p_times integer)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_out text[] := '{}';
    v_msg record;
BEGIN
    FOR i IN 1..p_times LOOP
        SELECT d.id, d.num_attempts INTO v_msg FROM lonnymq.message_dequeue(60000, 1, p_channel) AS d;
        IF NOT FOUND THEN
            v_out := v_out || 'nothing'::text;
            CONTINUE;
        END IF;
        v_out := v_out || coalesce(lonnymq.message_fail(v_msg.id, v_msg.num_attempts, 'e' || i), 'NULL');
    END LOOP;
    RETURN array_to_string(v_out, ',');
END;
$$;

-- A channel's counters against the messages it really holds: for
-- max_concurrency, admission (0.11.0, replacing num_locked): num_admitted
-- is the number of admitted messages, at most max_concurrency, every lock
-- is admitted, and no message is held while the channel has room (no
-- release interval, not paused; 0.15.0: what neither its admitted messages
-- nor its placed unclaimed ones take up); for max_size, num_created -
-- num_removed.
-- 'exact' or what differs.
CREATE FUNCTION pg_temp.counters(p_channel text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT coalesce(nullif(concat_ws(', ',
        CASE WHEN c.max_concurrency IS NOT NULL AND c.num_admitted <> a.n THEN 'num_admitted ' || c.num_admitted || ' but ' || a.n || ' admitted' END,
        CASE WHEN c.num_admitted > c.max_concurrency THEN 'num_admitted ' || c.num_admitted || ' over max_concurrency' END,
        CASE WHEN c.max_concurrency IS NOT NULL AND l.n > 0 THEN l.n || ' locked but not admitted' END,
        CASE WHEN c.max_concurrency IS NOT NULL AND NOT c.is_paused AND c.release_interval_ms = 0
            AND c.num_admitted + u.n < c.max_concurrency AND w.n > 0 THEN w.n || ' held with room' END,
        CASE WHEN c.max_size IS NOT NULL AND q.num_created - c.num_removed <> h.n THEN 'held count ' || (q.num_created - c.num_removed) || ' but ' || h.n || ' held' END
    ), ''), 'exact')
    FROM lonnymq.channel AS c
    LEFT JOIN lonnymq.channel_quota AS q ON q.channel_id = c.id
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM lonnymq.message AS m WHERE m.channel = c.name AND m.is_admitted) AS a
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM lonnymq.message AS m WHERE m.channel = c.name AND m.is_locked AND NOT m.is_admitted) AS l
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM lonnymq.message AS m WHERE m.channel = c.name AND m.is_held) AS w
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM lonnymq.message AS m WHERE m.channel = c.name AND m.position IS NOT NULL AND NOT m.is_admitted
    ) AS u
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM lonnymq.message AS m WHERE m.channel = c.name) AS h
    WHERE c.name = p_channel
$$;

-- ---------------------------------------------------------------- channel_set
SELECT lives_ok($$ SELECT lonnymq.channel_set('c', p_max_attempts => 3) $$, 'channel_set with a named new parameter');
SELECT is(
    (SELECT concat_ws(' ', max_attempts, backoff_base_ms, backoff_factor, backoff_max_ms, backoff_jitter, dedup_window_ms, retain_history, notify, max_concurrency, max_size, release_interval_ms)
     FROM lonnymq.channel WHERE name = 'c'),
    '3 1000 2 3600000 0.1 0 f f 0',
    'max_attempts is stored, every other parameter takes its default'
);
SELECT lonnymq.channel_set('c', p_backoff_base_ms => 10, p_backoff_factor => 1.5, p_backoff_max_ms => 99, p_backoff_jitter => 0, p_dedup_window_ms => 7, p_retain_history => TRUE, p_notify => TRUE);
SELECT is(
    (SELECT concat_ws(' ', coalesce(max_attempts, -1), backoff_base_ms, backoff_factor, backoff_max_ms, backoff_jitter, dedup_window_ms, retain_history, notify)
     FROM lonnymq.channel WHERE name = 'c'),
    '-1 10 1.5 99 0 7 t t',
    'a second call sets the whole configuration (max_attempts back to unlimited)'
);

-- ---------------------------------------------------------------- backoff
-- base 200 ms, factor 2, cap 1000 ms, no jitter: attempt 1 -> 200, 3 -> 800, 4 -> 1600 capped to 1000.
SELECT lonnymq.channel_set(ch, p_max_attempts => 10, p_backoff_base_ms => 200, p_backoff_factor => 2,
    p_backoff_max_ms => 1000, p_backoff_jitter => 0)
FROM unnest(ARRAY['r1', 'r3', 'r4']) AS ch;
SELECT lonnymq.message_create(ch, 'x') FROM unnest(ARRAY['r1', 'r3', 'r4']) AS ch;
SELECT pg_temp.deliver('r1') AS r1 \gset
SELECT pg_temp.deliver('r3', 1), pg_temp.deliver('r4', 1);
SELECT pg_sleep(0.005);
SELECT pg_temp.deliver('r3', 1), pg_temp.deliver('r4', 1);
SELECT pg_sleep(0.005);
SELECT pg_temp.deliver('r4', 1);
SELECT pg_temp.deliver('r3') AS r3 \gset
SELECT pg_sleep(0.005);
SELECT pg_temp.deliver('r4') AS r4 \gset
SELECT split_part(:'r1', ':', 1)::bigint AS r1_id, split_part(:'r3', ':', 1)::bigint AS r3_id,
    split_part(:'r4', ':', 1)::bigint AS r4_id \gset
SELECT is(ARRAY[split_part(:'r1', ':', 2), split_part(:'r3', ':', 2), split_part(:'r4', ':', 2)], ARRAY['1', '3', '4'],
    'attempts 1, 3 and 4 (expired locks count)');
CREATE TEMP TABLE fails (id bigint, before_ms bigint, result text, after_ms bigint);
INSERT INTO fails
SELECT f.id, pg_temp.lmq_now(), lonnymq.message_fail(f.id, f.tok, 'boom'), pg_temp.lmq_now()
FROM (VALUES (:r1_id, 1), (:r3_id, 3), (:r4_id, 4)) AS f (id, tok);
SELECT is((SELECT string_agg(result, ',' ORDER BY id) FROM fails), 'retry,retry,retry', 'message_fail under max_attempts: retry');
SELECT is(
    (SELECT string_agg((m.dequeue_at - f.after_ms <= d.delay AND m.dequeue_at - f.before_ms >= d.delay)::text, ',' ORDER BY f.id)
     FROM fails AS f
     INNER JOIN lonnymq.message AS m ON m.id = f.id
     INNER JOIN (VALUES (:r1_id, 200), (:r3_id, 800), (:r4_id, 1000)) AS d (id, delay) ON d.id = f.id),
    'true,true,true',
    'jitter 0: dequeue_at = now + base * factor^(n-1), capped at backoff_max_ms'
);
SELECT is((SELECT count(*) FROM lonnymq.message WHERE id IN (:r1_id, :r3_id, :r4_id) AND NOT is_locked), 3::bigint,
    'a retried message is unlocked');
SELECT is(pg_temp.deliver('r1'), NULL, 'and is not delivered before its backoff');
SELECT pg_sleep(greatest(0, (SELECT dequeue_at FROM lonnymq.message WHERE id = :r1_id) - pg_temp.lmq_now() + 2) / 1000.0);
SELECT is(pg_temp.deliver('r1'), :r1_id || ':2', 'but after it, as the next attempt');

-- No overflow at any attempt count: base 1000 * 1000^(n-1) is capped at 5000.
SELECT lonnymq.channel_set('rbig', p_backoff_base_ms => 1000, p_backoff_factor => 1000, p_backoff_max_ms => 5000, p_backoff_jitter => 0);
SELECT lonnymq.message_create('rbig', 'x') AS rbig_id \gset
SELECT pg_temp.deliver('rbig');
-- (Its 2147483647th delivery, after 2147483646 failures: max_attempts counts
-- failures since 0.9.0.)
UPDATE lonnymq.message SET num_attempts = 2147483647, num_failures = 2147483646 WHERE id = :rbig_id;
SELECT pg_temp.lmq_now() AS rbig_before \gset
SELECT is(lonnymq.message_fail(:rbig_id, 2147483647, 'x'), 'retry', 'attempt 2147483647: retry');
SELECT ok(
    (SELECT dequeue_at BETWEEN :rbig_before + 5000 AND pg_temp.lmq_now() + 5000 FROM lonnymq.message WHERE id = :rbig_id),
    'its delay is backoff_max_ms'
);

-- With jitter: within [d * (1 - j), d].
SELECT lonnymq.channel_set('jit', p_backoff_base_ms => 1000, p_backoff_jitter => 0.5);
SELECT count(*) FROM lonnymq.message_create_batch('jit', array_fill('j'::bytea, ARRAY[40]));
CREATE TEMP TABLE jfails AS
SELECT d.id, pg_temp.lmq_now() AS before_ms, lonnymq.message_fail(d.id, d.num_attempts) AS result, pg_temp.lmq_now() AS after_ms
FROM lonnymq.message_dequeue(60000, 40, 'jit') AS d;
SELECT is((SELECT count(*) FROM jfails WHERE result = 'retry'), 40::bigint, '40 retries');
SELECT is(
    (SELECT count(*) FROM jfails AS f INNER JOIN lonnymq.message AS m ON m.id = f.id
     WHERE m.dequeue_at - f.before_ms >= 500 AND m.dequeue_at - f.after_ms <= 1000),
    40::bigint,
    'jitter 0.5: every delay within [500, 1000] ms'
);
SELECT cmp_ok(
    (SELECT count(DISTINCT m.dequeue_at - f.before_ms) FROM jfails AS f INNER JOIN lonnymq.message AS m ON m.id = f.id),
    '>', 10::bigint,
    'and the delays are spread'
);

-- ---------------------------------------------------------------- dead by message_fail
-- max_attempts counts failed deliveries (0.9.0): the defer is not one, so
-- the fourth delivery's failure is the third, and the last.
SELECT lonnymq.channel_set('df', p_max_attempts => 3, p_backoff_base_ms => 0);
SELECT lonnymq.message_create('df', 'payload', NULL, 'dk') AS df_id \gset
SELECT is(pg_temp.deliver('df'), :df_id || ':1', 'attempt 1');
SELECT is(lonnymq.message_defer(:df_id, 1, NULL, 'st'), TRUE, 'defer with a state (not a failure)');
SELECT is(pg_temp.deliver('df'), :df_id || ':2', 'attempt 2');
SELECT is(lonnymq.message_fail(:df_id, 2, 'e2'), 'retry', 'fails: retry (base 0: due at once)');
SELECT m::text AS df_row FROM lonnymq.message AS m WHERE m.id = :df_id \gset
SELECT is(lonnymq.message_fail(:df_id, 2, 'again'), NULL, 'failing an unlocked message: NULL');
SELECT is(pg_temp.deliver('df', 1), :df_id || ':3', 'attempt 3 (1 ms lock)');
SELECT pg_sleep(0.005);
SELECT is(pg_temp.deliver('df', 1), :df_id || ':4', 'its lock expired: attempt 4 (an expiry is not a fail() call)');
SELECT is(lonnymq.message_fail(:df_id, 3, 'stale'), NULL, 'a stale token: NULL');
SELECT is(lonnymq.message_fail(9223372036854775807, 1, 'x'), NULL, 'an unknown id: NULL');
SELECT is(lonnymq.message_fail(:df_id, 4, 'e4'), 'dead', 'its third failure, at max_attempts (3): dead');
SELECT is((SELECT count(*) FROM lonnymq.message WHERE id = :df_id), 0::bigint, 'the message is gone');
SELECT is(
    (SELECT concat_ws(' ', d.channel, convert_from(d.content, 'UTF8'), convert_from(d.state, 'UTF8'), d.key, d.num_attempts, d.last_error)
     FROM lonnymq.dead_letter AS d WHERE d.id = :df_id),
    'df payload st dk 4 e4',
    'dead_letter: channel, content, state, key, num_attempts, last_error'
);
SELECT is(
    (SELECT string_agg(e ->> 'attempt' || ' ' || coalesce(e ->> 'error', 'NULL'), ', ' ORDER BY o)
     FROM lonnymq.dead_letter AS d, jsonb_array_elements(d.attempt_log) WITH ORDINALITY AS a (e, o) WHERE d.id = :df_id),
    '2 e2, 3 lock expired, 4 e4',
    'the attempt log has every failed attempt, the expired lock included'
);
SELECT is(
    (SELECT count(*) FROM lonnymq.dead_letter AS d, jsonb_array_elements(d.attempt_log) AS e
     WHERE d.id = :df_id AND (e ->> 'at')::bigint BETWEEN lonnymq.to_epoch(now()) AND pg_temp.lmq_now()),
    3::bigint,
    'each entry has its time'
);
SELECT ok(
    (SELECT dead_at BETWEEN lonnymq.to_epoch(now()) AND pg_temp.lmq_now() AND created_at <= dead_at FROM lonnymq.dead_letter WHERE id = :df_id),
    'dead_at and created_at'
);

-- Counters after dead-lettering by message_fail: max_concurrency and max_size.
SELECT lonnymq.channel_set('dfc', p_max_concurrency => 1, p_max_size => 3, p_max_attempts => 1);
SELECT lonnymq.message_create('dfc', 'a') AS dfc_a, lonnymq.message_create('dfc', 'b') AS dfc_b \gset
SELECT is(pg_temp.deliver('dfc'), :dfc_a || ':1', 'max_concurrency 1: a delivered');
SELECT is(pg_temp.deliver('dfc'), NULL, 'saturated');
SELECT is(lonnymq.message_fail(:dfc_a, 1, 'x'), 'dead', 'max_attempts 1: the first failure is dead');
SELECT is(pg_temp.counters('dfc'), 'exact', 'admission and the held count follow');
-- (0.15.0: the channel's takes claim, num_admitted counts its locks; the
-- dead message gave its claim back, and b is placed, unclaimed.)
SELECT is(
    ARRAY[(SELECT count(*) FROM lonnymq.message WHERE channel = 'dfc' AND is_locked),
        (SELECT num_admitted FROM lonnymq.channel WHERE name = 'dfc'),
        (SELECT count(*) FROM lonnymq.message WHERE id = :dfc_b AND position IS NOT NULL AND NOT is_admitted)],
    ARRAY[0, 0, 1]::bigint[],
    'nothing locked or claimed, b placed in its place'
);
SELECT is(pg_temp.deliver('dfc'), :dfc_b || ':1', 'the channel is no longer saturated');
SELECT is(
    ARRAY[lonnymq.message_create('dfc', 'c') IS NULL, lonnymq.message_create('dfc', 'd') IS NULL, lonnymq.message_create('dfc', 'e') IS NULL],
    ARRAY[FALSE, FALSE, TRUE],
    'max_size 3 holding 1: room for exactly 2'
);

-- ---------------------------------------------------------------- dead by expired locks
-- Defers are not failures (0.9.0; 0.8.0 delivered a max_attempts 1 message
-- through ten defers, and a dead letter of a max_attempts 4 channel carried
-- num_attempts 5): ten defers, then the first failure is the last.
SELECT lonnymq.channel_set('dd', p_max_attempts => 1, p_backoff_base_ms => 0);
SELECT lonnymq.message_create('dd', 'step') AS dd_id \gset
DO $$
BEGIN
    FOR i IN 1..10 LOOP
        PERFORM lonnymq.message_defer(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'dd') AS d;
    END LOOP;
END;
$$;
SELECT is(pg_temp.deliver('dd'), :dd_id || ':11', 'ten defers: the eleventh delivery');
SELECT is(lonnymq.message_fail(:dd_id, 11, 'first failure'), 'dead', 'max_attempts 1: its first failure is dead');
SELECT is((SELECT num_attempts FROM lonnymq.dead_letter WHERE id = :dd_id), 11,
    'the dead letter carries its deliveries (11), which max_attempts does not count');

-- A message whose lock expires max_attempts times goes to the dead letters on
-- the dequeue that would have delivered it again, and that dequeue delivers
-- the channel's next message instead.
SELECT lonnymq.channel_set('dx', p_max_attempts => 2);
SELECT lonnymq.channel_set('dxc', p_max_concurrency => 1, p_max_size => 3, p_max_attempts => 2);
SELECT lonnymq.channel_set('dxs', p_max_size => 3, p_max_attempts => 2);
SELECT lonnymq.message_create(ch, 'X') FROM unnest(ARRAY['dx', 'dxc', 'dxs']) AS ch;
SELECT pg_temp.deliver(ch, 1) FROM unnest(ARRAY['dx', 'dxc', 'dxs']) AS ch;
SELECT pg_sleep(0.005);
SELECT pg_temp.deliver(ch, 1) FROM unnest(ARRAY['dx', 'dxc', 'dxs']) AS ch;
SELECT pg_sleep(0.005);
-- The next messages, due after the expired locks.
SELECT lonnymq.message_create(ch, 'Y', pg_temp.lmq_now()) FROM unnest(ARRAY['dx', 'dxc', 'dxs']) AS ch;
SELECT is(pg_temp.lmq_take(60000, 'dx'), 'dx:Y', 'unconstrained: the expired message is not delivered, the next one is');
SELECT is(pg_temp.lmq_take(60000, 'dxc'), 'dxc:Y', 'max_concurrency: the same');
SELECT is(pg_temp.lmq_take(60000, 'dxs'), 'dxs:Y', 'max_size: the same');
SELECT is(
    (SELECT string_agg(d.channel || ' ' || convert_from(d.content, 'UTF8') || ' ' || d.num_attempts || ' ' || d.last_error || ' '
        || jsonb_array_length(d.attempt_log), ', ' ORDER BY d.channel)
     FROM lonnymq.dead_letter AS d WHERE d.channel IN ('dx', 'dxc', 'dxs')),
    'dx X 2 lock expired 2, dxc X 2 lock expired 2, dxs X 2 lock expired 2',
    'each is a dead letter: 2 attempts, both "lock expired"'
);
SELECT is(pg_temp.counters('dxc'), 'exact', 'max_concurrency + max_size channel: counters exact');
SELECT is(pg_temp.counters('dxs'), 'exact', 'max_size channel: held count exact');

-- Without max_attempts nothing is ever dead.
SELECT lonnymq.channel_set('nm', p_backoff_base_ms => 0);
SELECT lonnymq.message_create('nm', 'forever') AS nm_id \gset
SELECT is(pg_temp.fail_times('nm', 12), 'retry,retry,retry,retry,retry,retry,retry,retry,retry,retry,retry,retry',
    'no max_attempts: every failure is a retry');
SELECT pg_temp.deliver('nm', 1);
SELECT pg_sleep(0.005);
SELECT is(pg_temp.deliver('nm'), :nm_id || ':14', 'and an expired lock is delivered again');
SELECT is((SELECT jsonb_array_length(attempt_log) FROM lonnymq.message WHERE id = :nm_id), 13, 'every failure is logged');
SELECT is((SELECT count(*) FROM lonnymq.dead_letter WHERE channel = 'nm'), 0::bigint, 'no dead letter');

-- ---------------------------------------------------------------- redrive
-- ra keeps keys for a window, rb frees them at once; rc's key is taken by a
-- new message after its holder died.
SELECT lonnymq.channel_set('ra', p_max_attempts => 1, p_dedup_window_ms => 3600000);
SELECT lonnymq.channel_set(ch, p_max_attempts => 1) FROM unnest(ARRAY['rb', 'rc']) AS ch;
SELECT lonnymq.message_create('ra', 'a1', NULL, 'ka') AS a1, lonnymq.message_create('ra', 'a2') AS a2 \gset
SELECT lonnymq.message_create('rb', 'b1', NULL, 'kb') AS b1, lonnymq.message_create('rb', 'b2') AS b2 \gset
SELECT lonnymq.message_create('rc', 'c1', NULL, 'kc') AS c1 \gset
SELECT pg_temp.fail_times(ch, n) FROM (VALUES ('ra', 2), ('rb', 2), ('rc', 1)) AS t (ch, n);
SELECT is((SELECT string_agg(channel || ':' || convert_from(content, 'UTF8'), ',' ORDER BY id) FROM lonnymq.dead_letter WHERE channel IN ('ra', 'rb', 'rc')),
    'ra:a1,ra:a2,rb:b1,rb:b2,rc:c1', 'five dead letters');
SELECT is(lonnymq.message_create('ra', 'dup', NULL, 'ka'), :a1::bigint, 'a dead message''s key is held for the window');
SELECT lonnymq.message_create('rc', 'c-new', NULL, 'kc') AS c_new \gset
SELECT is(lonnymq.dead_letter_redrive(p_ids => ARRAY[:a2]::bigint[]), 1, 'redrive by ids');
SELECT is(lonnymq.dead_letter_redrive('ra', ARRAY[:b1, :b2]::bigint[]), 0, 'both filters: ids of another channel match nothing');
SELECT is(lonnymq.dead_letter_redrive('rb'), 2, 'redrive by channel');
SELECT is(lonnymq.dead_letter_redrive('ra', ARRAY[:a1, :a2]::bigint[]), 1, 'both filters');
SELECT is((SELECT count(*) FROM lonnymq.dead_letter WHERE channel IN ('ra', 'rb')), 0::bigint, 'those dead letters are gone');
SELECT is(
    (SELECT string_agg(concat_ws(' ', c.name, convert_from(m.content, 'UTF8'), m.id IN (:a1, :a2, :b1, :b2), m.num_attempts, m.num_failures, NOT m.is_locked, m.dequeue_at <= pg_temp.lmq_now(), coalesce(m.key, '-'), jsonb_array_length(m.attempt_log)), ', ' ORDER BY m.id)
     FROM lonnymq.message AS m INNER JOIN lonnymq.channel AS c ON c.name = m.channel WHERE c.name IN ('ra', 'rb')),
    'ra a1 t 1 0 t t ka 1, ra a2 t 1 0 t t - 1, rb b1 t 1 0 t t kb 1, rb b2 t 1 0 t t - 1',
    'redriven (0.16.0): their ids and attempt counts kept, failures from 0, deliverable now, keys and attempt logs kept'
);
SELECT is(
    (SELECT string_agg(k.key || '=' || convert_from(m.content, 'UTF8') || ':' || coalesce(k.expires_at::text, 'held'), ',' ORDER BY k.key)
     FROM lonnymq.message_key AS k INNER JOIN lonnymq.message AS m ON m.id = k.message_id WHERE k.key IN ('ka', 'kb')),
    'ka=a1:held,kb=b1:held',
    'their keys are claimed again by the new messages (windowed and freed ones alike)'
);
SELECT is(
    lonnymq.message_create('rb', 'dup', NULL, 'kb'),
    (SELECT m.id FROM lonnymq.message AS m WHERE m.content = 'b1'),
    'a producer presenting the key gets the redriven message'
);
SELECT is(
    (SELECT string_agg(convert_from(d.content, 'UTF8'), ',' ORDER BY d.content) FROM lonnymq.message_dequeue(60000, 10, 'ra') AS d)
    || ',' || (SELECT string_agg(convert_from(d.content, 'UTF8'), ',' ORDER BY d.content) FROM lonnymq.message_dequeue(60000, 10, 'rb') AS d),
    'a1,a2,b1,b2',
    'redriven messages are delivered'
);
SELECT is(
    (SELECT string_agg(m.id || ':' || m.num_attempts, ',' ORDER BY m.id) FROM lonnymq.message AS m WHERE m.channel IN ('ra', 'rb')),
    format('%s:2,%s:2,%s:2,%s:2', :a1, :a2, :b1, :b2),
    'their next delivery''s token is the count of attempts, grown on: a token from before their death never matches'
);
SELECT is(lonnymq.message_complete(:a1, 1), FALSE, 'the token of the delivery that died is refused');
SELECT cmp_ok((SELECT count(*)::integer FROM lonnymq.dead_letter), '>=', 5, 'dead letters of other channels are left');
SELECT count(*)::integer AS dead_left FROM lonnymq.dead_letter \gset
SELECT is(lonnymq.dead_letter_redrive(), :dead_left, 'redrive with no filter: all of them');
SELECT is((SELECT count(*) FROM lonnymq.dead_letter), 0::bigint, 'no dead letter left');
SELECT is(
    (SELECT coalesce(m.key, '-') FROM lonnymq.message AS m WHERE m.content = 'c1'),
    '-',
    'a redriven message whose key another message holds now has no key'
);
SELECT is(
    (SELECT k.message_id FROM lonnymq.message_key AS k INNER JOIN lonnymq.channel AS c ON c.id = k.channel_id WHERE c.name = 'rc' AND k.key = 'kc'),
    :c_new::bigint,
    'and the key stays with that message'
);

-- ---------------------------------------------------------------- dead_letter_delete
INSERT INTO lonnymq.dead_letter (id, channel, content, num_attempts, created_at, dead_at)
SELECT nextval('lonnymq.message_id_seq'), ch, 'x', 1, 0, 0
FROM unnest(ARRAY['del_a', 'del_a', 'del_a', 'del_b', 'del_b']) AS ch;
SELECT throws_ok($$ SELECT lonnymq.dead_letter_delete() $$, '22004', NULL,
    'deleting without a filter needs p_all => true: 22004');
SELECT is(lonnymq.dead_letter_delete(NULL, array(SELECT id FROM lonnymq.dead_letter WHERE channel = 'del_a' ORDER BY id LIMIT 1)),
    1, 'by ids: one deleted');
SELECT is(lonnymq.dead_letter_delete('del_b', array(SELECT id FROM lonnymq.dead_letter WHERE channel = 'del_a')),
    0, 'ids of another channel than p_channel: none deleted');
SELECT is(lonnymq.dead_letter_delete('del_a'), 2, 'by channel: the rest of del_a');
SELECT is((SELECT count(*) FROM lonnymq.dead_letter WHERE channel = 'del_b'), 2::bigint, 'del_b untouched');
SELECT cmp_ok(lonnymq.dead_letter_delete(p_all => TRUE), '>=', 2, 'p_all deletes every dead letter');
SELECT is((SELECT count(*) FROM lonnymq.dead_letter), 0::bigint, 'none left');

SELECT * FROM finish();
ROLLBACK;
