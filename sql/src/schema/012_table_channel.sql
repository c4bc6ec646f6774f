-- One row per channel: its limits and its place in the round-robin rotation.
--
-- The rotation: a channel is in the rotation when next_at IS NOT NULL; it is
-- eligible once next_at <= now, and eligible channels are served in
-- (next_at, turn) order.  next_at is the time the channel became ready or was
-- last served (plus release_interval_ms), never a message's own dequeue_at, so
-- an urgent message cannot make its channel jump the rotation.
--
-- wait_at IS NOT NULL means a consumer found nothing deliverable before
-- wait_at (NULL next_at with wait_at = max bigint: the channel is empty).
-- Producers read it while holding the producer guard shared (an advisory
-- lock, _channel_guard_shared) and leave a channel_wake row when their
-- message is deliverable earlier; consumers only set wait_at while holding
-- that guard exclusively, which no producer in flight allows.  Producers
-- never lock or write this row.
--
-- is_paused: channel_pause took the channel out of the rotation (next_at and
-- wait_at NULL, so producers leave no wake-ups); channel_resume puts it back.
--
-- The retry policy (max_attempts, backoff_*), dedup_window_ms, retain_history
-- and notify are read by message_fail, the producers and message_complete;
-- see channel_set.  notify_payload (0.9.0): what the channel's
-- notifications carry, NULL meaning its name; channel_set stores its id or
-- '' there when asked to: PostgreSQL has no access control on LISTEN, so a
-- channel's name can be kept from every role that connects.
--
-- num_locked is maintained only for channels with max_concurrency, and
-- num_removed only for channels with max_size: an unconstrained channel's row
-- is written only when it is served, never by producers or by completes.
--
-- Where a dequeue starts its walk of the channel's messages is not kept
-- here but in channel_floor (raised up to 50 times a second).
CREATE TABLE @extschema@.channel (
    id bigint NOT NULL DEFAULT pg_catalog.nextval('@extschema@.channel_id_seq'),
    name text NOT NULL,
    max_concurrency integer,
    max_size integer,
    release_interval_ms bigint NOT NULL DEFAULT 0,
    next_at bigint,
    turn bigint,
    wait_at bigint DEFAULT 9223372036854775807,
    last_served_at bigint,
    num_locked integer NOT NULL DEFAULT 0,
    num_removed bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    is_paused boolean NOT NULL DEFAULT FALSE,
    max_attempts integer,
    backoff_base_ms bigint NOT NULL DEFAULT 1000,
    backoff_factor double precision NOT NULL DEFAULT 2.0,
    backoff_max_ms bigint NOT NULL DEFAULT 3600000,
    backoff_jitter double precision NOT NULL DEFAULT 0.1,
    dedup_window_ms bigint NOT NULL DEFAULT 0,
    retain_history boolean NOT NULL DEFAULT FALSE,
    notify boolean NOT NULL DEFAULT FALSE,
    notify_payload text,
    CONSTRAINT channel_pkey PRIMARY KEY (id),
    CONSTRAINT channel_name_key UNIQUE (name),
    CONSTRAINT channel_name_check CHECK (
        pg_catalog.length(name) BETWEEN 1 AND 255
    ),
    CONSTRAINT channel_max_concurrency_check CHECK (max_concurrency >= 1),
    CONSTRAINT channel_max_size_check CHECK (max_size >= 1),
    CONSTRAINT channel_release_interval_check CHECK (
        release_interval_ms >= 0
    ),
    CONSTRAINT channel_num_locked_check CHECK (num_locked >= 0),
    CONSTRAINT channel_max_attempts_check CHECK (max_attempts >= 1),
    CONSTRAINT channel_backoff_check CHECK (
        backoff_base_ms BETWEEN 0 AND 31536000000
        AND backoff_factor BETWEEN 1.0 AND 1000.0
        AND backoff_max_ms BETWEEN 0 AND 31536000000
        AND backoff_jitter BETWEEN 0.0 AND 1.0
    ),
    CONSTRAINT channel_dedup_window_check CHECK (
        dedup_window_ms BETWEEN 0 AND 31536000000
    )
) WITH (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0.05
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel', '');

COMMENT ON TABLE @extschema@.channel IS
'One row per channel: its configuration (limits, retry policy, dedup window, history, notifications), its pause state and its place in the round-robin rotation.';

COMMENT ON COLUMN @extschema@.channel.id IS
'The channel''s id, from channel_id_seq; message, channel_quota, channel_wake, channel_floor and message_key refer to the channel by it.';

COMMENT ON COLUMN @extschema@.channel.name IS
'The channel''s name, 1 to 255 characters, unique; dead_letter, message_history and schedule refer to the channel by name.';

COMMENT ON COLUMN @extschema@.channel.max_concurrency IS
'At most this many of the channel''s messages locked at once, expired locks included (channel_set); NULL: no limit.';

COMMENT ON COLUMN @extschema@.channel.max_size IS
'At most this many messages held by the channel, ready, scheduled and locked together (channel_set); NULL: no limit.';

COMMENT ON COLUMN @extschema@.channel.release_interval_ms IS
'Minimum time in milliseconds between two deliveries from the channel (channel_set); 0: none.';

COMMENT ON COLUMN @extschema@.channel.next_at IS
'Rotation, internal state maintained by the queue functions, not to be written by hand: epoch ms from which the channel is eligible; NULL: out of the rotation (empty, waiting or paused).';

COMMENT ON COLUMN @extschema@.channel.turn IS
'Rotation, internal state maintained by the queue functions, not to be written by hand: tie-breaker from channel_turn_seq that orders channels with equal next_at.';

COMMENT ON COLUMN @extschema@.channel.wait_at IS
'Rotation, internal state maintained by the queue functions, not to be written by hand: a consumer found nothing deliverable before this epoch ms; max bigint: empty; NULL: not waiting.';

COMMENT ON COLUMN @extschema@.channel.last_served_at IS
'Rotation, internal state maintained by the queue functions, not to be written by hand: epoch ms of the last recorded delivery, from which release_interval_ms is measured; NULL: none.';

COMMENT ON COLUMN @extschema@.channel.num_locked IS
'Counted locks of the channel, internal state maintained by the queue functions, not to be written by hand; kept only when max_concurrency is set.';

COMMENT ON COLUMN @extschema@.channel.num_removed IS
'Messages removed from the channel, internal state maintained by the queue functions, not to be written by hand; kept only when max_size is set (held = channel_quota.num_created - num_removed).';

COMMENT ON COLUMN @extschema@.channel.created_at IS
'When the channel was created, in epoch milliseconds.';

COMMENT ON COLUMN @extschema@.channel.is_paused IS
'TRUE while channel_pause keeps the channel out of the rotation (no deliveries) until channel_resume; not part of the configuration channel_set sets.';

COMMENT ON COLUMN @extschema@.channel.max_attempts IS
'The most failed deliveries (message_fail calls, expired locks) a message may have; the last one makes it a dead letter (channel_set); NULL: no limit.';

COMMENT ON COLUMN @extschema@.channel.backoff_base_ms IS
'Retry delay in milliseconds after a message''s first failure (channel_set); the n-th waits min(backoff_max_ms, backoff_base_ms * backoff_factor^(n-1)), less jitter.';

COMMENT ON COLUMN @extschema@.channel.backoff_factor IS
'Factor by which the retry delay grows with each further failure of a message (channel_set).';

COMMENT ON COLUMN @extschema@.channel.backoff_max_ms IS
'Cap in milliseconds on the retry delay that message_fail schedules (channel_set).';

COMMENT ON COLUMN @extschema@.channel.backoff_jitter IS
'Fraction, 0 to 1, of the retry delay that may be taken off at random, to spread the retries of a burst (channel_set).';

COMMENT ON COLUMN @extschema@.channel.dedup_window_ms IS
'How long in milliseconds a message''s deduplication key stays claimed after it was completed or dead-lettered (channel_set); 0: released with the message.';

COMMENT ON COLUMN @extschema@.channel.retain_history IS
'Whether completing a message of the channel copies it into message_history (channel_set).';

COMMENT ON COLUMN @extschema@.channel.notify IS
'Whether calls that make a message of the channel deliverable now send NOTIFY lonnymq (channel_set).';

COMMENT ON COLUMN @extschema@.channel.notify_payload IS
'What the channel''s notifications carry: its id as text, or an empty string (channel_set''s p_notify_payload id or none); NULL: the channel''s name.';
