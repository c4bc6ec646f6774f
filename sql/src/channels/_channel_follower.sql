-- Internal: the configuration a channel without one of its own takes from
-- its pattern p_pattern (a row whose prefix its name starts with): the
-- pattern's settings, the channel's id and name, no admission counts, and
-- pattern = the pattern's name.  A notify payload of 'id' is the channel's
-- id, not the pattern's.  SQL and IMMUTABLE: inlined into its callers.
-- Parameters: p_pattern, the pattern's row; p_channel, the channel's name.
-- Returns: a channel row, stored only when admission needs counts for it
--   (its first admission, _message_promote) or the channel is paused
--   (channel_pause, through _channel_lock).
-- Calls: _channel_id.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._channel_follower(p_pattern @extschema@.channel, p_channel text)
RETURNS @extschema@.channel
LANGUAGE sql IMMUTABLE
AS $$
    SELECT ROW(
        @extschema@._channel_id(p_channel), p_channel,
        p_pattern.max_concurrency, NULL, p_pattern.release_interval_ms, NULL, 0, 0, p_pattern.created_at, FALSE,
        p_pattern.max_attempts, p_pattern.backoff_base_ms, p_pattern.backoff_factor, p_pattern.backoff_max_ms,
        p_pattern.backoff_jitter, p_pattern.dedup_window_ms, p_pattern.retain_history, p_pattern.notify,
        CASE
            WHEN p_pattern.notify_payload <> '' THEN @extschema@._channel_id(p_channel)::text
            ELSE p_pattern.notify_payload
        END,
        0, p_pattern.is_ordered, p_pattern.name, NULL, -9223372036854775808, NULL
    )::@extschema@.channel
$$;

COMMENT ON FUNCTION @extschema@._channel_follower(@extschema@.channel, text) IS
'Internal: the configuration a channel without its own takes from its pattern, as a channel row.';

REVOKE ALL ON FUNCTION @extschema@._channel_follower(@extschema@.channel, text) FROM PUBLIC;
