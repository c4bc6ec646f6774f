-- Per-channel figures for monitoring.  Cost: for each channel, one pass
-- over its entries in message_channel_ix, reading the rows (for is_locked:
-- since 0.6.0 message_locked_ix holds only the locks of channels with
-- max_concurrency), one probe for the head and one range of
-- dead_letter_channel_ix; never a scan of the message table.  Counts are exact as of the
-- statement's snapshot:
--   ready:     deliverable now (dequeue_at <= now, not locked)
--   scheduled: not locked, deliverable later (future dequeue_at, deferred)
--   locked:    held by a worker (expired locks included, until recovered)
--   dead:      in dead_letter
--   oldest_ready_age_ms: how long the channel's next message in delivery
--     order has been deliverable, now - greatest(dequeue_at, created_at);
--     the age of its oldest ready message unless priorities reorder it.
-- Uses only pg_catalog functions, so any role with SELECT on it can read it
-- (the admin access set has SELECT on lonnymq's tables and views).
CREATE OR REPLACE VIEW @extschema@.channel_stats AS
WITH clock AS (
    SELECT
        pg_catalog.floor(
            pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000
        )::bigint AS now_ms
)

SELECT
    c.name AS channel,
    n.due - n.expired AS ready,
    n.total - n.due - (n.locked - n.expired) AS scheduled,
    n.locked,
    d.dead,
    clock.now_ms - greatest(h.dequeue_at, h.created_at) AS oldest_ready_age_ms,
    c.is_paused,
    c.max_concurrency,
    c.max_size,
    c.release_interval_ms,
    c.max_attempts,
    c.backoff_base_ms,
    c.backoff_factor,
    c.backoff_max_ms,
    c.backoff_jitter,
    c.dedup_window_ms,
    c.retain_history,
    c.notify
FROM @extschema@.channel AS c
CROSS JOIN clock
CROSS JOIN
    LATERAL (
        SELECT
            pg_catalog.count(*) AS total,
            pg_catalog.count(*) FILTER (WHERE m.dequeue_at <= clock.now_ms) AS due,
            pg_catalog.count(*) FILTER (WHERE m.is_locked) AS locked,
            pg_catalog.count(*) FILTER (
                WHERE m.is_locked AND m.dequeue_at <= clock.now_ms
            ) AS expired
        FROM @extschema@.message AS m
        WHERE m.channel_id = c.id
    ) AS n
CROSS JOIN
    LATERAL (
        SELECT pg_catalog.count(*) AS dead
        FROM @extschema@.dead_letter AS dl
        WHERE dl.channel = c.name
    ) AS d
LEFT JOIN LATERAL (
    SELECT
        m.dequeue_at,
        m.created_at
    FROM @extschema@.message AS m
    WHERE
        m.channel_id = c.id
        AND m.dequeue_at <= clock.now_ms
        AND NOT m.is_locked
    ORDER BY m.dequeue_at, m.id
    LIMIT 1
) AS h ON TRUE;

COMMENT ON VIEW @extschema@.channel_stats IS
'Per channel: ready, scheduled, locked and dead messages, the age of the next ready message, the pause state and the configuration. Reads index ranges only.';

COMMENT ON COLUMN @extschema@.channel_stats.channel IS
'The channel''s name.';

COMMENT ON COLUMN @extschema@.channel_stats.ready IS
'Messages not locked whose dequeue_at has come; a paused channel, or one at its max_concurrency or inside its release_interval_ms, still counts them.';

COMMENT ON COLUMN @extschema@.channel_stats.scheduled IS
'Messages not locked whose dequeue_at is in the future: created for later, deferred, or waiting out a retry backoff.';

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
