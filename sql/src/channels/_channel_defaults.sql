-- Internal: the configuration of a channel that has none of its own: no
-- limits (max_concurrency, max_size, max_attempts NULL, no release
-- interval), the default retry policy (1000 ms, doubling, at most one hour,
-- jitter 0.1), no dedup window, no history, no notifications, not ordered,
-- no pattern.  The one place the defaults are written: channel_set's
-- parameters default to the same values (its page says so), and a channel
-- given a row by channel_pause starts from this row when no pattern
-- applies to it.
-- Parameters: p_channel, the name; p_now, its creation time (epoch ms).
-- Returns: a channel row, not stored.
-- Calls: _channel_id.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._channel_defaults(p_channel text, p_now bigint)
RETURNS @extschema@.channel
LANGUAGE sql IMMUTABLE
AS $$
    SELECT ROW(
        @extschema@._channel_id(p_channel), p_channel,
        NULL, NULL, 0, NULL, 0, 0, p_now, FALSE,
        NULL, 1000, 2.0, 3600000, 0.1, 0, FALSE, FALSE, NULL, 0, FALSE, NULL, NULL, -9223372036854775808, NULL
    )::@extschema@.channel
$$;

COMMENT ON FUNCTION @extschema@._channel_defaults(text, bigint) IS
'Internal: the configuration of a channel without one (no limits, default retry policy), as a channel row that is not stored.';

REVOKE ALL ON FUNCTION @extschema@._channel_defaults(text, bigint) FROM PUBLIC;
