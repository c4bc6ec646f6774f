-- Schema changes from 0.10.1 to 0.11.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.10.1
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.10.1--0.11.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one, and a queue upgraded with messages,
-- locks, keys and limits delivers as before).
--
-- The delivery model changes (doc/dequeue-design.md): the rotation of
-- channel rows, the wake-ups and the floors go; a ready message gets its
-- place in the round order; channels with limits admit their messages; a
-- channel without configuration has no row.  Every message, lock, token,
-- schedule, key and grant is kept.

-- 1. What 0.11.0 no longer has.
DROP FUNCTION @extschema@._channel_place(@extschema@._channel_visit, bigint);
DROP FUNCTION @extschema@._channel_wake_front(bigint, bigint[], text);
DROP FUNCTION @extschema@._message_head(bigint, bigint, bigint, integer, boolean);
DROP FUNCTION @extschema@._channel_scan_from(bigint);
DROP FUNCTION @extschema@._channel_floor_last_raise(bigint);
DROP FUNCTION @extschema@._channel_release(bigint[], boolean, bigint);
DROP FUNCTION @extschema@._channel_arrival(@extschema@.channel, bigint, bigint);
DROP FUNCTION @extschema@._channel_of_message(bigint, boolean, boolean, boolean);
DROP FUNCTION @extschema@._channel_for_producer(text, bigint);
DROP FUNCTION @extschema@._channel_turn(bigint, bigint, bigint);
DROP FUNCTION @extschema@._dead_letter_requeued(@extschema@.channel, integer, bigint);
DROP FUNCTION @extschema@._channel_guard_try_exclusive(text);
DROP FUNCTION @extschema@._channel_guard_consumer(text);
DROP TYPE @extschema@._channel_visit;
DROP TYPE @extschema@._taken;
-- Tables and sequences registered with pg_extension_config_dump leave the
-- extension first (ALTER EXTENSION ... DROP removes the registration; a
-- DROP alone would leave their oids in pg_extension.extconfig), as 0.8.0
-- retired channel_floor_mark.
ALTER EXTENSION lonnymq DROP TABLE @extschema@.channel_wake;
DROP TABLE @extschema@.channel_wake;
ALTER EXTENSION lonnymq DROP SEQUENCE @extschema@.channel_wake_id_seq;
DROP SEQUENCE @extschema@.channel_wake_id_seq;
ALTER EXTENSION lonnymq DROP TABLE @extschema@.channel_floor;
DROP TABLE @extschema@.channel_floor;
ALTER EXTENSION lonnymq DROP SEQUENCE @extschema@.channel_floor_id_seq;
DROP SEQUENCE @extschema@.channel_floor_id_seq;
DROP INDEX @extschema@.channel_rotation_ix;
DROP INDEX @extschema@.message_locked_ix;
DROP INDEX @extschema@.message_channel_ix;

-- 2. Messages carry their channel's name; a channel's id is the hash of
-- its name (_channel_id), in messages, keys and quotas.  Every lock of a
-- channel with a limit (max_concurrency, release_interval_ms) or paused is
-- admitted, as _channel_readmit admits them: 0.10.1 counted (is_counted)
-- only the locks of a channel with max_concurrency, but a lock of a channel
-- with a release interval is admitted too, and its complete ends the
-- admission.
ALTER TABLE @extschema@.message RENAME COLUMN is_counted TO is_admitted;
ALTER TABLE @extschema@.message
ADD COLUMN channel text,
ADD COLUMN position bigint,
ADD COLUMN is_held boolean NOT NULL DEFAULT FALSE,
ADD COLUMN is_early boolean NOT NULL DEFAULT FALSE;
UPDATE @extschema@.message AS m
SET
    channel = c.name,
    channel_id = pg_catalog.hashtextextended(c.name, 0),
    is_admitted = m.is_locked AND (c.max_concurrency IS NOT NULL OR c.release_interval_ms > 0 OR c.is_paused)
FROM @extschema@.channel AS c
WHERE c.id = m.channel_id;
ALTER TABLE @extschema@.message ALTER COLUMN channel SET NOT NULL;
UPDATE @extschema@.message_key AS k
SET channel_id = pg_catalog.hashtextextended(c.name, 0)
FROM @extschema@.channel AS c
WHERE c.id = k.channel_id;
UPDATE @extschema@.channel_quota AS q
SET channel_id = pg_catalog.hashtextextended(c.name, 0)
FROM @extschema@.channel AS c
WHERE c.id = q.channel_id;

-- 3. channel holds configurations and admission counts.
ALTER TABLE @extschema@.channel DROP COLUMN next_at, DROP COLUMN turn, DROP COLUMN wait_at;
ALTER TABLE @extschema@.channel RENAME COLUMN last_served_at TO release_at;
ALTER TABLE @extschema@.channel RENAME COLUMN num_locked TO num_admitted;
ALTER TABLE @extschema@.channel RENAME CONSTRAINT channel_num_locked_check TO channel_num_admitted_check;
ALTER TABLE @extschema@.channel
ADD COLUMN num_pending integer NOT NULL DEFAULT 0,
ADD CONSTRAINT channel_num_pending_check CHECK (num_pending >= 0);
ALTER TABLE @extschema@.channel
ALTER COLUMN id DROP DEFAULT,
ALTER COLUMN release_interval_ms DROP DEFAULT,
ALTER COLUMN backoff_base_ms DROP DEFAULT,
ALTER COLUMN backoff_factor DROP DEFAULT,
ALTER COLUMN backoff_max_ms DROP DEFAULT,
ALTER COLUMN backoff_jitter DROP DEFAULT,
ALTER COLUMN dedup_window_ms DROP DEFAULT,
ALTER COLUMN retain_history DROP DEFAULT,
ALTER COLUMN notify DROP DEFAULT;
UPDATE @extschema@.channel AS c
SET
    id = pg_catalog.hashtextextended(c.name, 0),
    release_at = c.release_at + c.release_interval_ms,
    num_admitted = 0,
    -- A channel that chose its id as notification payload gets its new id.
    notify_payload = CASE WHEN c.notify_payload <> '' THEN pg_catalog.hashtextextended(c.name, 0)::text
        ELSE c.notify_payload END;
-- A channel whose configuration is the default one needs no row.
DELETE FROM @extschema@.channel AS c
WHERE
    c.max_concurrency IS NULL AND c.max_size IS NULL AND c.release_interval_ms = 0 AND NOT c.is_paused
    AND c.max_attempts IS NULL AND c.backoff_base_ms = 1000 AND c.backoff_factor = 2.0
    AND c.backoff_max_ms = 3600000 AND c.backoff_jitter = 0.1 AND c.dedup_window_ms = 0
    AND NOT c.retain_history AND NOT c.notify;
ALTER EXTENSION lonnymq DROP SEQUENCE @extschema@.channel_id_seq;
DROP SEQUENCE @extschema@.channel_id_seq;
ALTER EXTENSION lonnymq DROP SEQUENCE @extschema@.channel_turn_seq;
DROP SEQUENCE @extschema@.channel_turn_seq;

-- 4. The new indexes and sequences, as a fresh install creates them,
-- channel_stats, which now lists the channels without a row too (each by
-- channel_stats(name), the figures of one channel), and the
-- take's type of a turn.
-- @include sql/src/schema/032_index_message_channel.sql
-- @include sql/src/schema/033_index_message_ready.sql
-- @include sql/src/schema/034_index_message_due.sql
-- @include sql/src/schema/035_index_message_held.sql
-- @include sql/src/schema/036_index_message_early.sql
-- @include sql/src/schema/040_sequence_position_bound.sql
-- @include sql/src/schema/041_sequence_position_mark.sql
-- @include sql/src/schema/042_sequence_due_mark.sql
-- @include sql/src/schema/043_sequence_epoch_at.sql
-- @include sql/src/api/260_function_channel_stats.sql
-- @include sql/src/api/261_view_channel_stats.sql
-- @include sql/src/schema/072_type_turn.sql

-- 5. The round order: the ready messages of each channel without limits
-- take its places from round 0 in (dequeue_at, id) order (expired locks
-- stay locked: the first dequeue recovers them); a channel with limits, or
-- paused, admits its earliest ready messages while it has room (its locks
-- count) and holds the others.
WITH clock AS (
    SELECT @extschema@.to_epoch(pg_catalog.clock_timestamp()) AS now
),

ready AS (
    SELECT
        m.id,
        m.channel_id,
        c.id IS NOT NULL AS is_limited,
        pg_catalog.row_number() OVER (PARTITION BY m.channel_id ORDER BY m.dequeue_at, m.id) - 1 AS k,
        CASE
            WHEN c.id IS NULL THEN NULL
            WHEN c.is_paused THEN 0
            ELSE LEAST(
                COALESCE(c.max_concurrency - (
                    SELECT pg_catalog.count(*) FROM @extschema@.message AS l
                    WHERE l.channel_id = c.id AND l.is_admitted
                ), 1000000),
                CASE WHEN c.release_interval_ms > 0 THEN 1 ELSE 1000000 END
            )
        END AS room,
        c.release_at
    FROM @extschema@.message AS m
    CROSS JOIN clock
    LEFT JOIN @extschema@.channel AS c
        ON c.id = m.channel_id AND (c.max_concurrency IS NOT NULL OR c.release_interval_ms > 0 OR c.is_paused)
    WHERE NOT m.is_locked AND m.dequeue_at <= clock.now
)

UPDATE @extschema@.message AS m
SET
    position = CASE
        WHEN NOT r.is_limited THEN r.k * 1048576 + (r.channel_id & 1048575)
        WHEN r.k < r.room AND COALESCE(r.release_at <= clock.now, TRUE) THEN r.k * 1048576 + (r.channel_id & 1048575)
    END,
    dequeue_at = CASE
        WHEN r.is_limited AND r.k < r.room AND r.release_at > clock.now THEN r.release_at
        ELSE m.dequeue_at
    END,
    is_admitted = r.is_limited AND r.k < r.room,
    is_held = r.is_limited AND r.k >= r.room
FROM ready AS r, clock
WHERE m.id = r.id;
UPDATE @extschema@.channel AS c
SET
    num_admitted = (
        SELECT pg_catalog.count(*) FROM @extschema@.message AS m WHERE m.channel_id = c.id AND m.is_admitted
    ),
    num_pending = (
        SELECT pg_catalog.count(*) FROM @extschema@.message AS m
        WHERE m.channel_id = c.id AND m.is_admitted AND NOT m.is_locked AND c.release_interval_ms > 0
    )
WHERE c.max_concurrency IS NOT NULL OR c.release_interval_ms > 0 OR c.is_paused;

-- 6. The entry points' settings (900_entry_point_settings.sql, appended
-- below) gain jit = off.  ALTER FUNCTION ... SET appends a new setting
-- after the others, so on the entry points this upgrade does not create
-- again jit would come after plan_cache_mode, where a fresh install has
-- them in name order (pg_dump shows the order).  plan_cache_mode is reset
-- here and set again below, after jit.
DO $$
DECLARE
    v_function record;
BEGIN
    FOR v_function IN
        SELECT p.oid::pg_catalog.regprocedure AS signature
        FROM pg_catalog.pg_proc AS p
        INNER JOIN pg_catalog.pg_depend AS d
            ON
                d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid
                AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
        INNER JOIN pg_catalog.pg_extension AS e ON e.oid = d.refobjid AND e.extname = 'lonnymq'
        WHERE p.prosecdef
        ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s RESET plan_cache_mode', v_function.signature);
    END LOOP;
END;
$$;
