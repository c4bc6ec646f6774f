-- Periodic messages (schedule_set).  next_at is the next period boundary
-- still to produce, start_at + k * every_ms.  A schedule's next boundary is
-- a scheduled message of its channel, its pending occurrence
-- (occurrence_id; message.schedule names the schedule), which lies in
-- message_due_ix like any future-dated message.  The promotion that reaches
-- it (a dequeue's or tick()'s) locks this row, creates the following
-- occurrence and advances next_at in one transaction, so each period gives
-- exactly one message; missed periods are coalesced (_schedule_next).
--
-- Under a long-held snapshot (a report, a replica's feedback) none of a
-- schedule's row versions can be pruned, and a schedule every millisecond
-- makes a thousand a second.  Hence (0.13.1) no unique index: its check on
-- every update read every version of the row (schedule_set serialises the
-- names instead, with schedule_changer_seq for a transaction snapshot), and
-- the promotion reads the row newest version first and updates it by its
-- ctid.  Its one index is on the name, which never changes: its updates are
-- HOT when the page has room.
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
    occurrence_id bigint,
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
'Periodic messages (schedule_set): one message per period boundary start_at + k * every_ms, its pending occurrence promoted by message_dequeue or tick(); missed boundaries coalesce.';

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
'The clock, in epoch ms, when its last occurrence was promoted; NULL: none yet.';

COMMENT ON COLUMN @extschema@.schedule.num_runs IS
'Occurrences promoted so far, one per promotion however many boundaries it coalesced, counting those whose message a full channel refused.';

COMMENT ON COLUMN @extschema@.schedule.num_missed IS
'Missed period boundaries coalesced into a later boundary''s message (the catch-up rule).';

COMMENT ON COLUMN @extschema@.schedule.created_at IS
'When the schedule was first created, in epoch milliseconds (replacing it keeps this).';

COMMENT ON COLUMN @extschema@.schedule.set_at IS
'When schedule_set last created or replaced the schedule, in epoch milliseconds (0.13.1; the upgrade wrote created_at, or its own clock for a schedule then due).';

COMMENT ON COLUMN @extschema@.schedule.occurrence_id IS
'The id of its pending occurrence: the scheduled message (message.schedule = name) that becomes its message at next_at (0.15.0).';
