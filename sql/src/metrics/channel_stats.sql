-- One channel's figures for monitoring: the row of the view channel_stats for
-- p_channel (the view is this function for every channel it lists).  No row
-- when the channel has neither a configuration nor messages.  Cost: one probe
-- of channel_pkey, one pass over the channel's entries in message_channel_ix,
-- one probe for its next ready message and one range of
-- dead_letter_channel_ix: the channel's own messages, whatever the number of
-- channels (a filter on the view's name column cannot reach a channel without
-- a row but by listing every channel).  Counts are exact as of the statement's
-- snapshot:
--   ready:     deliverable now (dequeue_at <= now, not locked), held ones
--              of a channel at its limit or paused included
--   scheduled: not locked, deliverable later (future dequeue_at, deferred)
--   waiting:   created with p_after, some of its parents still to end
--              (doc/dependencies.md; last, a column added in 0.16.0)
--   locked:    held by a worker (expired locks included, until recovered)
--   dead:      in dead_letter
--   oldest_ready_age_ms: how long the channel's next message in delivery
--     order has been deliverable, now - greatest(dequeue_at, created_at);
--     the age of its oldest ready message unless priorities reorder it.
-- "Now" is the wall clock, read once per call.  A channel without a row has
-- its pattern's configuration or the defaults (_channel_config), and pattern
-- names that pattern; a pattern's name shows the pattern's configuration.
-- Parameters: p_channel, a channel's or pattern's name.
-- Returns: one row (its counts and its configuration), or none.
-- Calls: _clock_ms, _channel_id, _channel_config, _waiting_dequeue_at (a
--   constant).
-- Tables: reads message (message_channel_ix: the channel's messages),
--   message_wait (message_wait_pkey: whether one past any clock waits),
--   dead_letter (dead_letter_channel_ix), channel (channel_pkey: whether it
--   has a row).  (Its configuration through _channel_config.)
-- Locks: none.
CREATE FUNCTION @extschema@.channel_stats(p_channel text)
RETURNS TABLE (
    channel text,
    ready bigint,
    scheduled bigint,
    locked bigint,
    dead bigint,
    oldest_ready_age_ms bigint,
    is_paused boolean,
    max_concurrency integer,
    max_size integer,
    release_interval_ms bigint,
    max_attempts integer,
    backoff_base_ms bigint,
    backoff_factor double precision,
    backoff_max_ms bigint,
    backoff_jitter double precision,
    dedup_window_ms bigint,
    retain_history boolean,
    notify boolean,
    is_ordered boolean,
    pattern text,
    waiting bigint
)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT
        p_channel,
        n.due - n.expired,
        n.total - n.due - (n.locked - n.expired) - n.waiting,
        n.locked,
        d.dead,
        k.now - GREATEST(h.dequeue_at, h.created_at),
        (g.c).is_paused,
        (g.c).max_concurrency,
        (g.c).max_size,
        (g.c).release_interval_ms,
        (g.c).max_attempts,
        (g.c).backoff_base_ms,
        (g.c).backoff_factor,
        (g.c).backoff_max_ms,
        (g.c).backoff_jitter,
        (g.c).dedup_window_ms,
        (g.c).retain_history,
        (g.c).notify,
        (g.c).is_ordered,
        (g.c).pattern,
        n.waiting
    FROM (
        SELECT @extschema@._clock_ms() AS now, @extschema@._channel_id(p_channel) AS id
    ) AS k
    -- (OFFSET 0: the configuration read once, not once per column.)
    CROSS JOIN LATERAL (SELECT @extschema@._channel_config(k.id, p_channel) AS c OFFSET 0) AS g
    CROSS JOIN LATERAL (
        SELECT
            pg_catalog.count(*) AS total,
            pg_catalog.count(*) FILTER (WHERE m.dequeue_at <= k.now) AS due,
            pg_catalog.count(*) FILTER (WHERE m.is_locked) AS locked,
            pg_catalog.count(*) FILTER (WHERE m.is_locked AND m.dequeue_at <= k.now) AS expired,
            -- (Past any clock, and its own count there.)
            pg_catalog.count(*) FILTER (
                WHERE m.dequeue_at >= @extschema@._waiting_dequeue_at(-2305843009213693952) AND EXISTS (
                    SELECT 1 FROM @extschema@.message_wait AS w WHERE w.child_id = m.id AND w.bucket = -1
                )
            ) AS waiting
        FROM @extschema@.message AS m
        -- (A wake or a release row, schedule '', is no message.)
        WHERE m.channel_id = k.id AND m.channel = p_channel AND m.schedule IS DISTINCT FROM ''
    ) AS n
    CROSS JOIN LATERAL (
        SELECT pg_catalog.count(*) AS dead
        FROM @extschema@.dead_letter AS dl
        WHERE dl.channel = p_channel
    ) AS d
    LEFT JOIN LATERAL (
        SELECT m.dequeue_at, m.created_at
        FROM @extschema@.message AS m
        WHERE
            m.channel_id = k.id AND m.channel = p_channel AND m.dequeue_at <= k.now AND NOT m.is_locked
            AND m.schedule IS DISTINCT FROM ''
        ORDER BY m.dequeue_at, m.id
        LIMIT 1
    ) AS h ON TRUE
    WHERE n.total > 0 OR EXISTS (SELECT 1 FROM @extschema@.channel AS c WHERE c.id = k.id AND c.name = p_channel)
$$;

COMMENT ON FUNCTION @extschema@.channel_stats(text) IS
'One channel''s row of the view channel_stats (ready, scheduled, locked, dead and waiting messages, the age of the next ready message, the pause state and the configuration), reading only that channel''s messages; no row when the channel has neither configuration nor messages.';

REVOKE ALL ON FUNCTION @extschema@.channel_stats(text) FROM PUBLIC;
