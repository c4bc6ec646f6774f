-- Messages.  dequeue_at is the time the message may next be delivered: its
-- schedule while it waits, its lock expiry while a worker holds it.
-- num_attempts counts deliveries and is the fencing token; locked_by is the
-- role whose complete, defer, fail or heartbeat the lock accepts;
-- num_failures counts failed deliveries (max_attempts); key is the
-- producer's deduplication key (message_key holds the claim); attempt_log
-- holds one JSON object per failed attempt, carried into dead_letter.
--
-- Delivery (doc/dequeue-design.md).  A message is in one of four states,
-- named by _message_state:
--   placed     position is set: its place in the round order
--              (message_ready_ix), fixed when it was placed.  A placed
--              message may still be locked: an expired lock that a dequeue
--              promoted, whose holder may still complete it until it is
--              delivered again (is_recovered);
--   locked     is_locked, position NULL: dequeue_at is the lock's expiry
--              (message_due_ix: recovery);
--   scheduled  not locked, position NULL, not held: dequeue_at is when it
--              becomes deliverable (message_due_ix: promotion places or
--              holds it);
--   held       is_held: its channel's limit has no room for it
--              (message_held_ix: admission, in (dequeue_at, id) order).  A
--              held message may still be locked: an expired lock of a
--              limited or paused channel, whose holder may still complete
--              or heartbeat it.
-- No state combines these, and the tests check it after every test
-- (lonnymq_dev/invariants.py, ILLEGAL_STATES_SQL): a held message is
-- neither placed nor admitted, and only a placed message is early (every
-- call that clears a position clears is_early with it).  "Ready", the
-- user's word (channel_stats), is not locked and due: placed, held, or
-- scheduled with its time come.  Not CHECK constraints:
-- PostgreSQL parses a table's CHECK expressions again for every INSERT and
-- UPDATE statement, and one such constraint cost the worker loop 74k
-- instructions per message, 4.8 % (doc/dequeue-design.md, "A message's
-- states").  So readers that need a placed early message still test the
-- position (message_early_ix).
-- position = round * 2^20 + the channel's slot (the low 20 bits of
-- channel_id): its channel's turn, one per round.  A turn delivers its
-- channel's first ready message in (dequeue_at, id) order: the turn's
-- holder, unless the channel has an early message that sorts before it
-- (is_early: placed at the back although it sorts more than a second
-- before its channel's last ready message; message_early_ix), which the
-- turn delivers while the holder takes the early one's turn
-- (doc/dequeue-design.md).  is_admitted:
-- counted by its channel's admission (channel.num_admitted).  is_limited:
-- a message of a channel whose takes claim (_channel_claims: max_concurrency
-- without a release interval, a pause or order): placed unclaimed, its take
-- claims a unit of channel.num_admitted (_channel_claim) and sets
-- is_admitted, which it keeps while locked, recovered included.
-- channel is the channel's name and channel_id its hash (_channel_id): a
-- channel without configuration has no row.
-- headers: the producer's JSON object (W3C trace context and any other
-- metadata: doc/headers.md), returned with every delivery and carried into
-- dead_letter, message_history and back by a redrive; NULL, which costs a
-- bit of the null bitmap, when the producer gave none.
-- Dependencies (doc/dependencies.md): has_dependents, a message_edge row
-- names it as a parent, so its end resolves its dependents; its completion
-- reads the flag from the DELETE it runs anyway.  A message that waits for
-- its parents has a message_wait row (bucket -1: its count) and its
-- dequeue_at is 2^62 plus its own (_waiting_dequeue_at), past any clock,
-- so that no probe of message_due_ix reaches it; its last parent's end
-- gives it back its own, or the clock if later (_message_waits_count_down).
-- The waiting state costs the message row no column (five nullable columns
-- cost every message of the worker loop 10.4k instructions, 0.65 %:
-- doc/workflows-design.md, section 5).  On a release row (schedule '', id
-- the ended parent's: a due entry that resolves that parent's dependents
-- _release_batch_size at a time, _message_release_run), key is the
-- parent's end ('completed', 'dead', 'cancelled') and state its progress,
-- the last child it resolved (its id as text).
-- schedule: set only on a schedule's pending occurrence, a scheduled
-- message that its promotion turns into the schedule's message of that
-- boundary, creating the following occurrence (_schedule_next); '' on a
-- wake, a row that is no message: a due entry that makes a dequeue's
-- promotion walk a limited channel's held messages again (_channel_admit
-- leaves it when it may have missed a message held at its create,
-- _channel_hold_try; user calls and the counts skip it).  NULL on
-- every other message, so it costs a bit of the null bitmap, and it has no
-- index: one would be written by every INSERT and UPDATE of the worker loop.
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
    is_admitted boolean NOT NULL DEFAULT FALSE,
    locked_by pg_catalog.regrole,
    num_failures integer NOT NULL DEFAULT 0,
    channel text NOT NULL,
    position bigint,
    is_held boolean NOT NULL DEFAULT FALSE,
    is_early boolean NOT NULL DEFAULT FALSE,
    schedule text,
    is_limited boolean NOT NULL DEFAULT FALSE,
    headers jsonb,
    has_dependents boolean NOT NULL DEFAULT FALSE,
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
'The id of the message''s channel: the hash of its name (_channel_id), channel.id when the channel is configured.';

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

COMMENT ON COLUMN @extschema@.message.is_admitted IS
'Counted by its channel''s admission (channel.num_admitted), internal state maintained by the queue functions, not to be written by hand; only in channels with a limit.';

COMMENT ON COLUMN @extschema@.message.locked_by IS
'The role that took the lock, the only one whose complete, defer, fail or heartbeat it accepts; NULL on locks taken before 0.9.0; meaningless while not locked.';

COMMENT ON COLUMN @extschema@.message.num_failures IS
'Failed deliveries (message_fail calls, expired locks) since the message was created or redriven; max_attempts counts these, and a defer is not one.';

COMMENT ON COLUMN @extschema@.message.channel IS
'The name of the message''s channel.';

COMMENT ON COLUMN @extschema@.message.position IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: the message''s place in the round order while it is placed (round * 2^20 + its channel''s slot); NULL: locked, scheduled or held.';

COMMENT ON COLUMN @extschema@.message.is_held IS
'Admission, internal state maintained by the queue functions, not to be written by hand: held until its channel''s limit has room.';

COMMENT ON COLUMN @extschema@.message.is_limited IS
'Admission, internal state maintained by the queue functions, not to be written by hand: its channel limits the locks at once (max_concurrency without a release interval, pause or order), so its take claims a unit of the channel''s count (is_admitted while it holds it).';

COMMENT ON COLUMN @extschema@.message.is_early IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: the message sorts before the holder of an earlier turn of its channel (a priority message, a recovered lock), which delivers it instead; in message_early_ix.';

COMMENT ON COLUMN @extschema@.message.schedule IS
'Periodic messages, internal state maintained by the queue functions, not to be written by hand: the name of the schedule whose pending occurrence this is (scheduled at its next boundary, not counted by max_size, not cancellable; schedule_drop drops it); '''': a wake, no message (a due entry that walks a limited channel''s held messages again); NULL: any other message.';

COMMENT ON COLUMN @extschema@.message.headers IS
'The producer''s headers, a JSON object (W3C trace context: traceparent, tracestate), returned with every delivery; NULL: none given.';

COMMENT ON COLUMN @extschema@.message.has_dependents IS
'Dependencies, internal state maintained by the queue functions, not to be written by hand: other messages wait for this one (message_edge), so its end resolves them.';
