-- Schema changes from 0.15.0 to 0.16.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.15.0
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.15.0--0.16.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- Headers (doc/headers.md): a JSON object per message, given by its
-- producer, returned with every delivery, carried into the dead letters and
-- the history.  Added last, where a fresh install has them (NULL: no table
-- is rewritten).
ALTER TABLE @extschema@.message ADD COLUMN headers jsonb;
ALTER TABLE @extschema@.dead_letter ADD COLUMN headers jsonb;
ALTER TABLE @extschema@.message_history ADD COLUMN headers jsonb;
ALTER TYPE @extschema@.delivery ADD ATTRIBUTE headers jsonb;

-- The producer calls take the headers as their last parameter: new
-- signatures (the users' direct grants on the old ones are carried to the
-- new ones: tools/build_upgrade.py).
DROP FUNCTION @extschema@.message_create(text, bytea, bigint, text);
DROP FUNCTION @extschema@.message_create_batch(text, bytea[], bigint[], text[]);
DROP FUNCTION @extschema@.message_publish(text, bytea, bigint, text, boolean);
DROP FUNCTION @extschema@.message_publish_batch(text, bytea[], bigint[], text[], boolean);
DROP FUNCTION @extschema@._check_batch(bytea[], bigint[], text[]);

-- Dependencies (doc/dependencies.md): the parent flag, added last where a
-- fresh install has it (a constant default: no table is rewritten), the
-- dead letters' parents, the edges and the counts.
ALTER TABLE @extschema@.message ADD COLUMN has_dependents boolean NOT NULL DEFAULT FALSE;
ALTER TABLE @extschema@.dead_letter ADD COLUMN after bigint[];
ALTER TABLE @extschema@.dead_letter ADD COLUMN after_mode text;
-- @include sql/src/schema/message_edge.sql
-- @include sql/src/schema/message_wait.sql

-- channel_stats gains a last column, waiting: a new return type, so the
-- function is created again; the view over it is replaced first by one of
-- its own columns that needs no function (a DROP would lose the grants on
-- it), and by its new definition after the functions.
CREATE OR REPLACE VIEW @extschema@.channel_stats AS
SELECT
    NULL::text AS channel, NULL::bigint AS ready, NULL::bigint AS scheduled, NULL::bigint AS locked,
    NULL::bigint AS dead, NULL::bigint AS oldest_ready_age_ms, NULL::boolean AS is_paused,
    NULL::integer AS max_concurrency, NULL::integer AS max_size, NULL::bigint AS release_interval_ms,
    NULL::integer AS max_attempts, NULL::bigint AS backoff_base_ms, NULL::double precision AS backoff_factor,
    NULL::bigint AS backoff_max_ms, NULL::double precision AS backoff_jitter, NULL::bigint AS dedup_window_ms,
    NULL::boolean AS retain_history, NULL::boolean AS notify, NULL::boolean AS is_ordered, NULL::text AS pattern
WHERE FALSE;
DROP FUNCTION @extschema@.channel_stats(text);

-- @after functions
-- @include sql/src/metrics/channel_stats_view.sql
