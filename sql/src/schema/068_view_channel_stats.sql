-- Per-channel figures for monitoring, for every channel that is
-- configured or holds messages.  Cost: for each channel, a probe of
-- message_channel_ix to find it, one pass over its entries there, one
-- probe for the head and one range of dead_letter_channel_ix.  (Two names
-- with one hash, _channel_id, show as one of them.)  Counts are exact as of the statement's
-- snapshot:
--   ready:     deliverable now (dequeue_at <= now, not locked), held ones
--              of a channel at its limit or paused included
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
),

-- The channels that hold messages: one probe of message_channel_ix per
-- channel (the next channel_id after the last one found), not a pass over
-- every message.
holding AS (
    WITH RECURSIVE ids AS (
        SELECT min(m.channel_id) AS id
        FROM @extschema@.message AS m
        WHERE m.channel_id IS NOT NULL
        UNION ALL
        SELECT (
            SELECT min(m.channel_id)
            FROM @extschema@.message AS m
            WHERE m.channel_id > ids.id
        )
        FROM ids
        WHERE ids.id IS NOT NULL
    )

    SELECT
        ids.id,
        (
            SELECT m.channel
            FROM @extschema@.message AS m
            WHERE m.channel_id = ids.id
            ORDER BY m.channel_id, m.position NULLS FIRST, m.dequeue_at, m.id
            LIMIT 1
        ) AS name
    FROM ids
    WHERE ids.id IS NOT NULL
),

channels AS (
    SELECT
        c.id,
        c.name
    FROM @extschema@.channel AS c
    UNION
    SELECT
        h.id,
        h.name
    FROM holding AS h
)

SELECT
    ch.name AS channel,
    n.due - n.expired AS ready,
    n.total - n.due - (n.locked - n.expired) AS scheduled,
    n.locked,
    d.dead,
    clock.now_ms - greatest(h.dequeue_at, h.created_at) AS oldest_ready_age_ms,
    -- A channel without a row has the defaults (_channel_defaults; no
    -- function call here: a view's caller needs EXECUTE on what it calls).
    coalesce(cfg.is_paused, FALSE) AS is_paused,
    cfg.max_concurrency,
    cfg.max_size,
    coalesce(cfg.release_interval_ms, 0) AS release_interval_ms,
    cfg.max_attempts,
    coalesce(cfg.backoff_base_ms, 1000) AS backoff_base_ms,
    coalesce(cfg.backoff_factor, 2.0) AS backoff_factor,
    coalesce(cfg.backoff_max_ms, 3600000) AS backoff_max_ms,
    coalesce(cfg.backoff_jitter, 0.1) AS backoff_jitter,
    coalesce(cfg.dedup_window_ms, 0) AS dedup_window_ms,
    coalesce(cfg.retain_history, FALSE) AS retain_history,
    coalesce(cfg.notify, FALSE) AS notify
FROM channels AS ch
CROSS JOIN clock
LEFT JOIN @extschema@.channel AS cfg ON ch.id = cfg.id AND ch.name = cfg.name
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
        WHERE m.channel_id = ch.id AND m.channel = ch.name
    ) AS n
CROSS JOIN
    LATERAL (
        SELECT pg_catalog.count(*) AS dead
        FROM @extschema@.dead_letter AS dl
        WHERE dl.channel = ch.name
    ) AS d
LEFT JOIN LATERAL (
    SELECT
        m.dequeue_at,
        m.created_at
    FROM @extschema@.message AS m
    WHERE
        m.channel_id = ch.id
        AND m.channel = ch.name
        AND m.dequeue_at <= clock.now_ms
        AND NOT m.is_locked
    ORDER BY m.dequeue_at, m.id
    LIMIT 1
) AS h ON TRUE;

COMMENT ON VIEW @extschema@.channel_stats IS
'Per channel, configured or holding messages: ready, scheduled, locked and dead messages, the age of the next ready message, the pause state and the configuration. Reads every message.';

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
