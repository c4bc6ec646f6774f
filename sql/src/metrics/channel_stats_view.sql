-- Per-channel figures for monitoring, for every channel that is
-- configured or holds messages: channel_stats(p_channel) for each (see it
-- for the figures and their cost).  Listing the channels costs one probe
-- of message_channel_ix per channel that holds messages (the next
-- channel_id after the last one found), not a pass over every message.
-- (Two names with one hash, _channel_id, show as one of them.)
-- A filter on the channel still lists every channel: channel_stats(name)
-- reads one channel only.
-- The first channel: "channel_id >= the least bigint", true of every row,
-- constrains the index's leading column, which message_channel_ix needs
-- (its header).  Not "channel_id IS NOT NULL": PostgreSQL 17 drops that
-- test of a NOT NULL column before it matches partial indexes, and the
-- view read all of message (test/python/test_plans.py, on 17 and 18).
CREATE VIEW @extschema@.channel_stats AS
WITH RECURSIVE holding AS (
    SELECT min(m.channel_id) AS id
    FROM @extschema@.message AS m
    WHERE m.channel_id >= '-9223372036854775808'::bigint
    UNION ALL
    SELECT (
        SELECT min(m.channel_id)
        FROM @extschema@.message AS m
        WHERE m.channel_id > holding.id
    )
    FROM holding
    WHERE holding.id IS NOT NULL
),

channels AS (
    SELECT c.name
    FROM @extschema@.channel AS c
    UNION
    SELECT (
        SELECT m.channel
        FROM @extschema@.message AS m
        WHERE m.channel_id = h.id
        ORDER BY m.channel_id, m.position NULLS FIRST, m.dequeue_at, m.id
        LIMIT 1
    )
    FROM holding AS h
    WHERE h.id IS NOT NULL
)

SELECT
    s.channel,
    s.ready,
    s.scheduled,
    s.locked,
    s.dead,
    s.oldest_ready_age_ms,
    s.is_paused,
    s.max_concurrency,
    s.max_size,
    s.release_interval_ms,
    s.max_attempts,
    s.backoff_base_ms,
    s.backoff_factor,
    s.backoff_max_ms,
    s.backoff_jitter,
    s.dedup_window_ms,
    s.retain_history,
    s.notify,
    s.is_ordered,
    s.pattern,
    s.waiting
FROM channels AS ch
CROSS JOIN LATERAL @extschema@.channel_stats(ch.name) AS s;
COMMENT ON VIEW @extschema@.channel_stats IS
'Per channel, configured or holding messages: ready, scheduled, locked, dead and waiting messages, the age of the next ready message, the pause state, the configuration and the pattern it follows: channel_stats(name) for each channel. Reads every message (the view metrics reads a bounded amount per channel); lonnymq.channel_stats(name) reads one channel.';

COMMENT ON COLUMN @extschema@.channel_stats.channel IS
'The channel''s name.';

COMMENT ON COLUMN @extschema@.channel_stats.ready IS
'Messages not locked whose dequeue_at has come; a paused channel, or one at its max_concurrency or inside its release_interval_ms, still counts them.';

COMMENT ON COLUMN @extschema@.channel_stats.scheduled IS
'Messages not locked whose dequeue_at is in the future: created for later, deferred, or waiting out a retry backoff.';

COMMENT ON COLUMN @extschema@.channel_stats.waiting IS
'Messages created with p_after some of whose parents are still to end (last: a column added in 0.16.0).';

COMMENT ON COLUMN @extschema@.channel_stats.locked IS
'Messages held by a worker, expired locks included until a message_dequeue recovers them.';

COMMENT ON COLUMN @extschema@.channel_stats.dead IS
'Rows of dead_letter filed under the channel''s name.';

COMMENT ON COLUMN @extschema@.channel_stats.oldest_ready_age_ms IS
'Milliseconds since the channel''s next ready message in (dequeue_at, id) order became deliverable, now - greatest(dequeue_at, created_at); NULL: none ready.';

COMMENT ON COLUMN @extschema@.channel_stats.is_paused IS
'Paused by channel_pause.';

COMMENT ON COLUMN @extschema@.channel_stats.max_concurrency IS
'As set by channel_set; NULL: unlimited.';

COMMENT ON COLUMN @extschema@.channel_stats.max_size IS
'As set by channel_set; NULL: unlimited.';

COMMENT ON COLUMN @extschema@.channel_stats.release_interval_ms IS
'As set by channel_set, in milliseconds.';

COMMENT ON COLUMN @extschema@.channel_stats.max_attempts IS
'As set by channel_set; NULL: unlimited.';

COMMENT ON COLUMN @extschema@.channel_stats.backoff_base_ms IS
'As set by channel_set, in milliseconds.';

COMMENT ON COLUMN @extschema@.channel_stats.backoff_factor IS
'As set by channel_set.';

COMMENT ON COLUMN @extschema@.channel_stats.backoff_max_ms IS
'As set by channel_set, in milliseconds.';

COMMENT ON COLUMN @extschema@.channel_stats.backoff_jitter IS
'As set by channel_set.';

COMMENT ON COLUMN @extschema@.channel_stats.dedup_window_ms IS
'As set by channel_set, in milliseconds.';

COMMENT ON COLUMN @extschema@.channel_stats.retain_history IS
'As set by channel_set.';

COMMENT ON COLUMN @extschema@.channel_stats.notify IS
'As set by channel_set.';

COMMENT ON COLUMN @extschema@.channel_stats.is_ordered IS
'As set by channel_set (p_ordered): one message locked at a time, and a failed or deferred one keeps its place.';

COMMENT ON COLUMN @extschema@.channel_stats.pattern IS
'The pattern (a name ending in *) whose configuration the channel follows; NULL when it has its own or none.';
