-- Periodic messages (schedule_set).  next_at is the next period boundary
-- still to produce, start_at + k * every_ms.  A due schedule is materialised
-- by whoever locks its row first (message_dequeue, or tick()), in the
-- transaction that advances next_at, so each period gives exactly one
-- message.  Missed periods are coalesced: see _schedule_run.
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
    CONSTRAINT schedule_pkey PRIMARY KEY (name),
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
