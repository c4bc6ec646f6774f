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

COMMENT ON TABLE @extschema@.message IS
'One row per message in the queue, waiting, scheduled or locked; a completed message is deleted, a dead one moves to dead_letter.';

COMMENT ON COLUMN @extschema@.message.id IS
'The message''s id, from message_id_seq: the handle workers use, and the FIFO tie-breaker within a channel.';

COMMENT ON COLUMN @extschema@.message.channel_id IS
'The message''s channel (channel.id).';

COMMENT ON COLUMN @extschema@.message.dequeue_at IS
'Epoch ms from which the message may be delivered: its schedule while it waits, its lock''s expiry while locked; a channel delivers in (dequeue_at, id) order.';

COMMENT ON COLUMN @extschema@.message.is_locked IS
'TRUE while a worker holds the message: delivered and not yet completed, deferred or failed; an expired lock stays locked until recovered.';

COMMENT ON COLUMN @extschema@.message.num_attempts IS
'Deliveries so far, recoveries of expired locks included; the fencing token that complete, defer, fail and heartbeat must present.';

COMMENT ON COLUMN @extschema@.message.created_at IS
'When the message was created, in epoch milliseconds (a redriven dead letter keeps its original time).';

COMMENT ON COLUMN @extschema@.message.content IS
'The message''s payload, as the producer gave it.';

COMMENT ON COLUMN @extschema@.message.state IS
'State saved by message_defer (progress, the last error) and returned with its next deliveries; NULL: none saved.';

COMMENT ON COLUMN @extschema@.message.key IS
'The producer''s deduplication key (message_create''s p_key), whose claim is in message_key; NULL: no key.';

COMMENT ON COLUMN @extschema@.message.attempt_log IS
'One JSON object per failed attempt (message_fail, an expired lock), {"attempt": n, "at": epoch ms, "error": text}, carried into dead_letter; NULL: none.';

COMMENT ON COLUMN @extschema@.message.is_counted IS
'The lock counts towards max_concurrency and is in message_locked_ix, internal state maintained by the queue functions, not to be written by hand; meaningless while not locked.';

COMMENT ON COLUMN @extschema@.message.locked_by IS
'The role that took the lock, the only one whose complete, defer, fail or heartbeat it accepts; NULL on locks taken before 0.9.0; meaningless while not locked.';

COMMENT ON COLUMN @extschema@.message.num_failures IS
'Failed deliveries (message_fail calls, expired locks) since the message was created or redriven; max_attempts counts these, and a defer is not one.';
