-- Configured channels: one row per channel given a configuration by
-- channel_set or a pause by channel_pause.  A channel without one has no
-- row: its messages carry its name and its id, the hash of the name
-- (_channel_id), so a channel costs nothing until it is configured, and a
-- million per-order channels that drain leave nothing behind.
--
-- Written only by configuration calls and, for a channel with a limit
-- (max_concurrency, release_interval_ms, a pause), by admission
-- (_channel_admit): the consumer's path of a channel without limits never
-- reads or writes it.  Admission keeps the limits exact without the take
-- ever seeing a channel that may not deliver:
--   num_admitted  the channel's admitted messages (ready, scheduled by its
--                 release interval, or locked): at most max_concurrency;
--   num_pending   admitted and not yet delivered (an expired lock made
--                 placed again included): at most one with a
--                 release_interval_ms;
--   release_at    no delivery before it (the last delivery's clock plus
--                 release_interval_ms).
-- num_removed (max_size only): messages removed, held = channel_quota.
-- num_created - num_removed; written by consumers, never by producers.
--
-- The configuration's defaults are _channel_defaults(), in one place.
--
-- Name patterns (doc/README.md, "Channels configured by a name pattern"):
-- channel_set('tenant-*', ...) stores a row named 'tenant-*' whose prefix
-- is 'tenant-'; a channel without a row of its own follows the longest
-- prefix of its name (_channel_pattern_config: probes of
-- channel_prefix_key).  A follower needs a row only while admission keeps
-- counts for it (its pattern has limits): the row is then a copy of the
-- pattern's configuration with pattern = the pattern's name, created by
-- its first admission and deleted when its counts are back to nothing
-- (_channel_admit), so that per-tenant channels that drain leave no rows.
CREATE TABLE @extschema@.channel (
    id bigint NOT NULL,
    name text NOT NULL,
    max_concurrency integer,
    max_size integer,
    release_interval_ms bigint NOT NULL,
    release_at bigint,
    num_admitted integer NOT NULL DEFAULT 0,
    num_removed bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    is_paused boolean NOT NULL DEFAULT FALSE,
    max_attempts integer,
    backoff_base_ms bigint NOT NULL,
    backoff_factor double precision NOT NULL,
    backoff_max_ms bigint NOT NULL,
    backoff_jitter double precision NOT NULL,
    dedup_window_ms bigint NOT NULL,
    retain_history boolean NOT NULL,
    notify boolean NOT NULL,
    notify_payload text,
    num_pending integer NOT NULL DEFAULT 0,
    is_ordered boolean NOT NULL DEFAULT FALSE,
    pattern text,
    prefix text COLLATE "C",
    admit_from bigint NOT NULL DEFAULT -9223372036854775808,
    wake_id bigint,
    CONSTRAINT channel_pkey PRIMARY KEY (id),
    CONSTRAINT channel_name_key UNIQUE (name),
    CONSTRAINT channel_name_check CHECK (
        pg_catalog.length(name) BETWEEN 1 AND 255
    ),
    CONSTRAINT channel_max_concurrency_check CHECK (max_concurrency >= 1),
    CONSTRAINT channel_ordered_check CHECK (NOT is_ordered OR max_concurrency = 1),
    -- A pattern's row: its name is its prefix and a '*'; it has no limit
    -- kept per channel that it could not give its followers (max_size,
    -- a pause) and follows nothing.
    CONSTRAINT channel_prefix_check CHECK (
        prefix IS NULL
        OR name = prefix || '*' AND pattern IS NULL AND max_size IS NULL AND NOT is_paused
    ),
    CONSTRAINT channel_max_size_check CHECK (max_size >= 1),
    CONSTRAINT channel_release_interval_check CHECK (
        release_interval_ms >= 0
    ),
    CONSTRAINT channel_num_admitted_check CHECK (num_admitted >= 0),
    CONSTRAINT channel_num_pending_check CHECK (num_pending >= 0),
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
'One row per configured channel (channel_set, channel_pause): its configuration (limits, retry policy, dedup window, history, notifications), its pause state and, for a channel with limits, its admission counts. A channel without configuration has no row.';

COMMENT ON COLUMN @extschema@.channel.id IS
'The channel''s id, the hash of its name (_channel_id); message, channel_quota and message_key refer to the channel by it.';

COMMENT ON COLUMN @extschema@.channel.name IS
'The channel''s name, 1 to 255 characters, unique; dead_letter, message_history and schedule refer to the channel by name.';

COMMENT ON COLUMN @extschema@.channel.max_concurrency IS
'At most this many of the channel''s messages locked at once, expired locks included (channel_set); NULL: no limit.';

COMMENT ON COLUMN @extschema@.channel.max_size IS
'At most this many messages held by the channel, ready, scheduled and locked together (channel_set); NULL: no limit.';

COMMENT ON COLUMN @extschema@.channel.release_interval_ms IS
'Minimum time in milliseconds between two deliveries from the channel (channel_set); 0: none.';

COMMENT ON COLUMN @extschema@.channel.release_at IS
'Admission, internal state maintained by the queue functions, not to be written by hand: epoch ms before which the channel delivers nothing more (its last delivery plus release_interval_ms); NULL: no delivery yet.';

COMMENT ON COLUMN @extschema@.channel.num_admitted IS
'Admission, internal state maintained by the queue functions, not to be written by hand: admitted messages (ready or locked), at most max_concurrency; kept only for channels with a limit.';

COMMENT ON COLUMN @extschema@.channel.num_pending IS
'Admission, internal state maintained by the queue functions, not to be written by hand: admitted messages not yet delivered (an expired lock placed again included), at most one with a release_interval_ms.';

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

COMMENT ON COLUMN @extschema@.channel.pattern IS
'The name of the pattern (a channel_set of a name ending in *) whose configuration this row copies, for a channel without a channel_set of its own whose pattern has limits (the row holds its admission counts and goes when they are back to nothing); NULL for a channel''s own configuration.';

COMMENT ON COLUMN @extschema@.channel.prefix IS
'For a pattern''s row (a channel_set of a name ending in *): the name without the *; the channels whose names start with it and have no configuration of their own follow this one, the longest prefix winning. NULL for a channel.';

COMMENT ON COLUMN @extschema@.channel.dedup_window_ms IS
'How long in milliseconds a message''s deduplication key stays claimed after it was completed or dead-lettered (channel_set); 0: released with the message.';

COMMENT ON COLUMN @extschema@.channel.retain_history IS
'Whether completing a message of the channel copies it into message_history (channel_set).';

COMMENT ON COLUMN @extschema@.channel.notify IS
'Whether calls that make a message of the channel deliverable now send NOTIFY lonnymq (channel_set).';

COMMENT ON COLUMN @extschema@.channel.notify_payload IS
'What the channel''s notifications carry: its id as text, or an empty string (channel_set''s p_notify_payload id or none); NULL: the channel''s name.';

COMMENT ON COLUMN @extschema@.channel.is_ordered IS
'Whether the channel is ordered (channel_set p_ordered): one message at a time (max_concurrency 1), and a failed, deferred or expired message keeps its admission, so no later message is delivered until it is completed, dead-lettered or cancelled.';

COMMENT ON COLUMN @extschema@.channel.admit_from IS
'Admission, internal state maintained by the queue functions (0.13.1): no message of the channel waiting for its admission has a dequeue_at below it; the walk of those messages starts there.';

COMMENT ON COLUMN @extschema@.channel.wake_id IS
'Admission, internal state maintained by the queue functions (0.15.0): the id of the last wake left for the channel (a message row whose schedule is ''''); one is pending while that row exists, and no other is left meanwhile; NULL: none left yet.';
