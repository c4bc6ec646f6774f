-- Schema changes from 0.14.0 to 0.15.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.14.0
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.14.0--0.15.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- Only a ready message is early (schema/message.sql).  Before 0.15.0,
-- message_heartbeat took an early expired lock back out of the round order
-- without clearing is_early: such rows are cleared.  (message_early_ix tests
-- the position, so they were never taken for early ones.)
UPDATE @extschema@.message SET is_early = FALSE WHERE is_early AND position IS NULL;

-- Periodic messages leave the take's path (schedules/_schedule_next.sql): a
-- schedule's next boundary becomes a scheduled message, its pending
-- occurrence (message.schedule names the schedule; schedule.occurrence_id
-- points at it), promoted like any other, and schedule_due_ix, which every
-- dequeue probed, goes.  Each schedule gets its occurrence at its next_at,
-- created at its set_at: the key in message_due_ix, greatest(dequeue_at,
-- created_at), is the key it had in schedule_due_ix, at or above the due
-- mark.  (The ALTERs hold both tables exclusively until the upgrade
-- commits: no schedule_set or promotion is in flight.)
ALTER TABLE @extschema@.message ADD COLUMN schedule text;
ALTER TABLE @extschema@.schedule ADD COLUMN occurrence_id bigint;
WITH occurrence AS (
    INSERT INTO @extschema@.message (channel_id, channel, dequeue_at, created_at, content, schedule)
    SELECT @extschema@._channel_id(s.channel), s.channel, s.next_at, s.set_at, s.content, s.name
    FROM @extschema@.schedule AS s
    RETURNING id, schedule
)
UPDATE @extschema@.schedule AS s SET occurrence_id = o.id
FROM occurrence AS o
WHERE s.name = o.schedule;
DROP INDEX @extschema@.schedule_due_ix;
DROP FUNCTION @extschema@._schedule_run(bigint, integer, bigint);
-- (It now returns how many periodic messages it made, for tick().)
DROP FUNCTION @extschema@._message_promote(bigint, bigint, bigint, integer);

-- The housekeeping of a worker's call has one entry point, before the take
-- (housekeeping/_housekeeping.sql): the marks' raise no longer needs what
-- the take took, only how many positions it may take (its parameters
-- change), and records the deliveries counted when it ran, so that an idle
-- queue's pollers write nothing.
-- @include sql/src/schema/marks_delivered_seq.sql
DROP FUNCTION @extschema@._marks_raise(bigint, bigint, bigint, bigint);

-- Completions follow channel rows only once a channel was configured with
-- something they follow (schema/channel_followed_seq.sql): history,
-- max_size, or a limit (max_concurrency, a release interval, ordered, a
-- pause).  channel_row_seq, set by any channel row, becomes
-- channel_followed_seq, set from the rows as they stand (the flag's
-- registration for pg_dump follows the sequence).  A pattern's rows count:
-- its limits are copied into its followers' rows.
ALTER SEQUENCE @extschema@.channel_row_seq RENAME TO channel_followed_seq;
SELECT pg_catalog.setval(
    '@extschema@.channel_followed_seq',
    CASE
        WHEN EXISTS (
            -- (_channel_admits: max_concurrency, which an ordered channel
            -- has, a release interval or a pause.)
            SELECT 1 FROM @extschema@.channel AS c
            WHERE c.retain_history OR c.max_size IS NOT NULL OR @extschema@._channel_admits(c)
        ) THEN 1
        ELSE 0
    END,
    TRUE
);
COMMENT ON SEQUENCE @extschema@.channel_followed_seq IS
'Configuration, internal state maintained by channel_set and channel_pause, not to be written by hand: 1 once a channel was configured with history, max_size or a limit (something its completions follow), else 0.';

-- A channel with max_concurrency and no release interval, pause or order
-- claims at the take (admission/_channel_claims.sql): max_concurrency
-- counts its locks, its messages are placed unclaimed (message.is_limited)
-- and each take claims.  Its locks hold claims and are counted; its
-- admitted messages not yet delivered are unclaimed again; its held
-- messages are placed, as its creates would have placed them, after the
-- functions (below): a take holds again those it has no room for.  (The
-- ALTER holds message exclusively until the upgrade commits.)
ALTER TABLE @extschema@.message ADD COLUMN is_limited boolean NOT NULL DEFAULT FALSE;
WITH claims AS (
    SELECT c.id, c.name FROM @extschema@.channel AS c
    WHERE c.max_concurrency IS NOT NULL AND c.release_interval_ms = 0 AND NOT c.is_paused AND NOT c.is_ordered
)
UPDATE @extschema@.message AS m
SET is_limited = TRUE, is_admitted = m.is_locked
FROM claims AS c
WHERE m.channel_id = c.id AND m.channel = c.name AND m.schedule IS DISTINCT FROM '';
UPDATE @extschema@.channel AS c
SET num_admitted = (
    SELECT pg_catalog.count(*)::integer FROM @extschema@.message AS m
    WHERE m.channel_id = c.id AND m.channel = c.name AND m.is_admitted
)
WHERE c.max_concurrency IS NOT NULL AND c.release_interval_ms = 0 AND NOT c.is_paused AND NOT c.is_ordered;

-- A channel's pending wake is found by its id, which its row keeps
-- (admission/_channel_wake.sql).  0.14.0 left no wakes: none to record.
ALTER TABLE @extschema@.channel ADD COLUMN wake_id bigint;
-- The take admits nothing (admission/_channel_release.sql): a delivery in
-- a channel with a release interval leaves a wake at the interval's end,
-- and admission loses its parameter for deliveries.
DROP FUNCTION @extschema@._channel_admit(bigint, integer, integer, boolean, bigint, bigint);

-- The early messages' probes test the position on each entry of
-- message_early_ix (schema/message_early_ix.sql): it is a column of the
-- index now, rebuilt (only early messages are in it).
DROP INDEX @extschema@.message_early_ix;
-- @include sql/src/schema/message_early_ix.sql

-- @after functions
-- (The held messages of the channels whose takes claim: placed, in each
-- channel's (dequeue_at, id) order, as _channel_readmit places a channel's
-- held messages when it has no limits.)
DO $upgrade$
DECLARE
    v_bound bigint := @extschema@._epoch_enter();
    v_held record;
BEGIN
    FOR v_held IN
        SELECT m.id, m.channel_id, m.dequeue_at
        FROM @extschema@.message AS m
        INNER JOIN @extschema@.channel AS c ON c.id = m.channel_id AND c.name = m.channel
        WHERE m.is_held AND @extschema@._channel_claims(c)
        ORDER BY m.channel_id, m.dequeue_at, m.id
    LOOP
        UPDATE @extschema@.message AS m
        SET is_held = FALSE, position = p.place, is_early = p.is_early
        FROM @extschema@._message_place(v_held.channel_id, v_bound, v_held.dequeue_at, 0) AS p
        WHERE m.id = v_held.id;
    END LOOP;
END
$upgrade$;
