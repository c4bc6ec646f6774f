-- Schema changes from 0.11.2 to 0.12.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.11.2
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.11.2--0.12.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- A name ending in '*' names a pattern from 0.12.0 on, never a channel:
-- an install with such a channel cannot take the upgrade as it is.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM @extschema@.channel AS c WHERE pg_catalog.right(c.name, 1) = '*')
        OR EXISTS (SELECT 1 FROM @extschema@.message AS m WHERE pg_catalog.right(m.channel, 1) = '*')
        OR EXISTS (SELECT 1 FROM @extschema@.schedule AS s WHERE pg_catalog.right(s.channel, 1) = '*')
        OR EXISTS (SELECT 1 FROM @extschema@.dead_letter AS d WHERE pg_catalog.right(d.channel, 1) = '*') THEN
        RAISE EXCEPTION 'lonnymq 0.12.0: a channel name ending in * names a pattern from 0.12.0 on'
            USING ERRCODE = '55000',
            HINT = 'Drain, drop or rename the channels whose names end in * (their messages, schedules and dead letters), then upgrade.';
    END IF;
END;
$$;

-- Ordered channels (channel_set p_ordered).
ALTER TABLE @extschema@.channel ADD COLUMN is_ordered boolean NOT NULL DEFAULT FALSE;
ALTER TABLE @extschema@.channel ADD CONSTRAINT channel_ordered_check CHECK (NOT is_ordered OR max_concurrency = 1);
DROP FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint, boolean,
    boolean, text
);

-- Name patterns (channel_set of a name ending in '*').
ALTER TABLE @extschema@.channel ADD COLUMN pattern text;
ALTER TABLE @extschema@.channel ADD COLUMN prefix text COLLATE "C";
ALTER TABLE @extschema@.channel ADD CONSTRAINT channel_prefix_check CHECK (
    prefix IS NULL
    OR name = prefix || '*' AND pattern IS NULL AND max_size IS NULL AND NOT is_paused
);
-- @include sql/src/schema/013_index_channel_prefix.sql
-- @include sql/src/schema/014_index_channel_pattern.sql

-- Topics (topic_bind, message_publish).
-- @include sql/src/schema/068_table_topic_binding.sql
-- @include sql/src/schema/069_index_topic_binding_wildcard.sql

-- Whether a pattern was ever set (channel_pattern_seq): none before 0.12.0.
-- @include sql/src/schema/044_sequence_channel_pattern.sql

-- Metrics (the view metrics, metrics_text()): the counters' sequences, and
-- the access set monitor.
-- @include sql/src/schema/045_sequence_messages_created.sql
-- @include sql/src/schema/046_sequence_messages_delivered.sql
-- @include sql/src/schema/047_sequence_messages_completed.sql
-- @include sql/src/schema/048_sequence_messages_failed.sql
-- @include sql/src/schema/049_sequence_messages_lock_expired.sql
-- @include sql/src/schema/049_sequence_messages_dead_lettered.sql
ALTER TABLE @extschema@.access_grant DROP CONSTRAINT access_grant_access_check;
ALTER TABLE @extschema@.access_grant ADD CONSTRAINT access_grant_access_check CHECK (
    access IN ('producer', 'consumer', 'monitor', 'admin')
);

-- channel_stats gains the columns is_ordered and pattern: its function's
-- result changes, so the view over it goes first and comes back after the
-- functions (the grants of admin return with _access_apply).
DROP VIEW @extschema@.channel_stats;
DROP FUNCTION @extschema@.channel_stats(text);

-- @after functions
-- @include sql/src/api/261_view_channel_stats.sql
-- @include sql/src/api/281_view_metrics.sql
