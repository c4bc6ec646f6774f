-- Periodic messages (schedule_set).  next_at is the next period boundary
-- still to produce, start_at + k * every_ms.  A due schedule is materialised
-- by whoever locks its row first (message_dequeue, or tick()), in the
-- transaction that advances next_at, so each period gives exactly one
-- message.  Missed periods are coalesced: see _schedule_run.
--
-- Under a long-held snapshot (a report, a replica's feedback) none of a
-- schedule's row versions can be pruned, and a schedule every millisecond
-- makes a thousand a second.  Hence (0.13.1) no unique index: its check on
-- every update read every version of the row (schedule_set serialises the
-- names instead, with schedule_changer_seq for a transaction snapshot), the
-- run updates the row it locked by its ctid, and the delivery's probes of
-- schedule_due_ix start at the due mark (_marks_raise stops the mark at the
-- first key), so the dead entries below it are never read.  The key is
-- greatest(next_at, set_at), as message_due_ix's is greatest(dequeue_at,
-- created_at): a start in the past is due at once, and its next_at is
-- below the mark.
CREATE TABLE @extschema@.schedule (
    name text NOT NULL,
    channel text NOT NULL,
    content bytea NOT NULL,
    every_ms bigint NOT NULL,
    start_at bigint NOT NULL,
    next_at bigint NOT NULL,
    last_run_at bigint,
    num_runs bigint NOT NULL DEFAULT 0,
    num_missed bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    set_at bigint NOT NULL,
    CONSTRAINT schedule_name_check CHECK (
        pg_catalog.length(name) BETWEEN 1 AND 255
    ),
    CONSTRAINT schedule_every_check CHECK (
        every_ms BETWEEN 1 AND 31536000000
    )
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_threshold = 100
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.schedule', '');

COMMENT ON TABLE @extschema@.schedule IS
'Periodic messages (schedule_set): one message per period boundary start_at + k * every_ms, created by message_dequeue or tick(); missed boundaries coalesce.';

COMMENT ON COLUMN @extschema@.schedule.name IS
'The schedule''s name, 1 to 255 characters (schedule_set, schedule_drop).';

COMMENT ON COLUMN @extschema@.schedule.channel IS
'The name of the channel its messages are created in.';

COMMENT ON COLUMN @extschema@.schedule.content IS
'The payload of each message it creates.';

COMMENT ON COLUMN @extschema@.schedule.every_ms IS
'The period in milliseconds, 1 to 31536000000.';

COMMENT ON COLUMN @extschema@.schedule.start_at IS
'Epoch ms the period boundaries start_at + k * every_ms are aligned to.';

COMMENT ON COLUMN @extschema@.schedule.next_at IS
'The next period boundary still to produce, in epoch ms; the schedule is due once it has passed.';

COMMENT ON COLUMN @extschema@.schedule.last_run_at IS
'The clock, in epoch ms, of the last materialisation; NULL: not materialised yet.';

COMMENT ON COLUMN @extschema@.schedule.num_runs IS
'Materialisations so far, one per run however many boundaries it coalesced, counting those whose message a full channel refused.';

COMMENT ON COLUMN @extschema@.schedule.num_missed IS
'Missed period boundaries coalesced into a later boundary''s message (the catch-up rule).';

COMMENT ON COLUMN @extschema@.schedule.created_at IS
'When the schedule was first created, in epoch milliseconds (replacing it keeps this).';

COMMENT ON COLUMN @extschema@.schedule.set_at IS
'When schedule_set last created or replaced the schedule, in epoch milliseconds (0.13.1; the upgrade wrote created_at, or its own clock for a schedule then due).';
