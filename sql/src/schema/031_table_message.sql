-- Messages.  dequeue_at is the time the message may next be delivered: its
-- schedule while it waits, its lock expiry while a worker holds it.  One
-- index over (channel_id, dequeue_at, id) therefore serves delivery, priority
-- (a past or negative dequeue_at) and crash recovery (an expired lock is just
-- a deliverable message again) with a single bounded probe.
-- num_attempts counts deliveries and is the fencing token.
-- key: the producer's deduplication key (message_key holds the claim);
-- attempt_log: one JSON object per failed attempt (message_fail, an expired
-- lock), carried into dead_letter.
-- is_counted: the lock (while is_locked) counts towards its channel's
-- max_concurrency, and so has an entry in message_locked_ix.  Set when the
-- lock is taken in a channel with max_concurrency, and by channel_set on
-- the channel's locks when it gives the channel that limit: every lock of a
-- channel with max_concurrency is counted.  Locks in other channels are
-- not, so a dequeue writes two index entries, not three.  Meaningless
-- while the message is not locked.  (Added in 0.6.0.)
-- locked_by: the role that took the lock (message_dequeue), the only one
-- whose complete, defer, fail or heartbeat the lock accepts: the fencing
-- token is a small guessable number.  A regrole, so that a dump restored
-- into another cluster names the same role.  NULL on locks taken before
-- 0.9.0 (any role may settle those); meaningless while the message is not
-- locked.  (Added in 0.9.0.)
-- num_failures: the message's failed deliveries since it was created or
-- redriven: message_fail, and locks that expired.  max_attempts counts
-- these, not deliveries: a defer is the worker's choice of a later time
-- (a step of a long job, a dependency not ready), not a failure, so a
-- message deferred any number of times keeps its retries.  (The last
-- column: added in 0.9.0.)
CREATE TABLE @extschema@.message (
    id bigint NOT NULL DEFAULT pg_catalog.nextval('@extschema@.message_id_seq'),
    channel_id bigint NOT NULL,
    dequeue_at bigint NOT NULL,
    is_locked boolean NOT NULL DEFAULT FALSE,
    num_attempts integer NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    content bytea NOT NULL,
    state bytea,
    key text,
    attempt_log jsonb,
    is_counted boolean NOT NULL DEFAULT FALSE,
    locked_by pg_catalog.regrole,
    num_failures integer NOT NULL DEFAULT 0,
    CONSTRAINT message_pkey PRIMARY KEY (id)
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0.05
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message', '');
