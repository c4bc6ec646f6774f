-- Schema changes from 0.1.0 to 0.2.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and re-applies the recorded
-- access grants, giving sql/lonnymq--0.1.0--0.2.0.sql.  Test:
-- test/python/test_upgrade.py (the upgraded schema equals a fresh one).

-- Signatures that changed: dropped here, created anew below.  Grants on
-- the public ones come back through _access_apply() at the end.
DROP FUNCTION @extschema@.channel_set(text, integer, integer, bigint);
DROP FUNCTION @extschema@.message_create(text, bytea, bigint);
DROP FUNCTION @extschema@._message_take(bigint, bigint, bigint, integer, boolean);
DROP FUNCTION @extschema@._channel_release(bigint, boolean, bigint);

-- Channel settings: pause, retry policy, dedup window, history, notify.
-- Constant defaults: no table rewrite.
ALTER TABLE @extschema@.channel
ADD COLUMN is_paused boolean NOT NULL DEFAULT FALSE,
ADD COLUMN max_attempts integer,
ADD COLUMN backoff_base_ms bigint NOT NULL DEFAULT 1000,
ADD COLUMN backoff_factor double precision NOT NULL DEFAULT 2.0,
ADD COLUMN backoff_max_ms bigint NOT NULL DEFAULT 3600000,
ADD COLUMN backoff_jitter double precision NOT NULL DEFAULT 0.1,
ADD COLUMN dedup_window_ms bigint NOT NULL DEFAULT 0,
ADD COLUMN retain_history boolean NOT NULL DEFAULT FALSE,
ADD COLUMN notify boolean NOT NULL DEFAULT FALSE,
ADD CONSTRAINT channel_max_attempts_check CHECK (max_attempts >= 1),
ADD CONSTRAINT channel_backoff_check CHECK (
    backoff_base_ms BETWEEN 0 AND 31536000000
    AND backoff_factor BETWEEN 1.0 AND 1000.0
    AND backoff_max_ms BETWEEN 0 AND 31536000000
    AND backoff_jitter BETWEEN 0.0 AND 1.0
),
ADD CONSTRAINT channel_dedup_window_check CHECK (
    dedup_window_ms BETWEEN 0 AND 31536000000
);

-- Messages: the deduplication key and the log of failed attempts.
ALTER TABLE @extschema@.message
ADD COLUMN key text,
ADD COLUMN attempt_log jsonb;

-- New objects, exactly as a fresh install creates them (make expands each
-- "@include" line into the file's text).
-- @include sql/src/060_table_message_key.sql
-- @include sql/src/061_index_message_key_expiry.sql
-- @include sql/src/062_table_dead_letter.sql
-- @include sql/src/063_index_dead_letter_channel.sql
-- @include sql/src/064_table_message_history.sql
-- @include sql/src/065_index_message_history_completed.sql
-- @include sql/src/066_table_schedule.sql
-- @include sql/src/067_index_schedule_due.sql
-- @include sql/src/068_view_channel_stats.sql
