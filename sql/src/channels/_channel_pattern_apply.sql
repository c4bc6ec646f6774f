-- Internal: a pattern with prefix p_prefix was set or dropped (its row is
-- already written): the channels whose names start with p_prefix and that
-- have no configuration of their own follow what now applies to them
-- (_channel_pattern_config: this pattern, a longer one, a shorter one, or
-- the defaults).
--   * Followers' rows (channels with admission counts or a pause,
--     channel_pattern_ix): each, under its guard and row lock, in the row
--     locks' key order (as completions take them), takes the new
--     configuration when it differs; changed limits admit its messages
--     again (_channel_readmit); a row that no longer admits (no limits, not
--     paused) goes.
--   * Channels without a row whose messages took places without admission
--     (no limits) when limits now apply (p_was_limited false): their
--     messages are admitted again, under a row made for them
--     (_channel_lock).  Found by reading the ready messages once: a
--     configuration call, done once; set a pattern's limits before its
--     channels' first messages and no such channel exists.
-- A message created by a transaction in flight under the old configuration
-- keeps it (doc/channel_set.md).
-- Parameters: p_prefix, the pattern's prefix; p_was_limited, whether the
--   configuration that applied to p_prefix before the change admitted
--   (_channel_admits); p_bound, the bound of the epoch the caller entered
--   (_epoch_enter); p_now, the caller's clock (epoch ms).
-- Returns: nothing.
-- Calls: _channel_guard_exclusive, _channel_row_lock, _channel_id,
--   _channel_pattern_config, _channel_defaults, _channel_readmit,
--   _channel_admits, _channel_config, _channel_lock.
-- Tables: reads channel (the followers' rows by channel_pattern_ix; each
--   one again by channel_pkey), message (every ready message, once, for
--   the channels without a row); writes channel (update, delete; message
--   updated through _channel_readmit).
-- Locks: for each channel it visits, the channel guard and bucket guard
--   (1819111681, 1819111682) exclusive until the transaction ends
--   (_channel_guard_exclusive); for a follower's row, then advisory
--   (1819111683, hashint8(id)) exclusive until the transaction ends
--   (_channel_row_lock) and the row FOR UPDATE, updated or deleted; for a
--   channel given a row, the same through _channel_lock; the messages
--   _channel_readmit updates.
CREATE FUNCTION @extschema@._channel_pattern_apply(
    p_prefix text,
    p_was_limited boolean,
    p_bound bigint,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_name text;
    v_row @extschema@.channel%ROWTYPE;
    v_new @extschema@.channel%ROWTYPE;
BEGIN
    FOR v_name IN
        SELECT c.name
        FROM @extschema@.channel AS c
        WHERE c.pattern IS NOT NULL AND pg_catalog.starts_with(c.name COLLATE "C", p_prefix)
        ORDER BY pg_catalog.hashint8(c.id)
    LOOP
        PERFORM @extschema@._channel_guard_exclusive(v_name);
        PERFORM @extschema@._channel_row_lock(@extschema@._channel_id(v_name));
        SELECT c.* INTO v_row
        FROM @extschema@.channel AS c
        WHERE c.id = @extschema@._channel_id(v_name) AND c.name = v_name
        FOR UPDATE;
        -- (Gone, or given its own configuration, meanwhile.)
        CONTINUE WHEN NOT FOUND OR v_row.pattern IS NULL;
        v_new := COALESCE(
            (SELECT f FROM @extschema@._channel_pattern_config(v_name) AS f), @extschema@._channel_defaults(v_name, 0)
        );
        CONTINUE WHEN (
            v_new.pattern, v_new.max_concurrency, v_new.release_interval_ms, v_new.is_ordered,
            v_new.max_attempts, v_new.backoff_base_ms, v_new.backoff_factor, v_new.backoff_max_ms,
            v_new.backoff_jitter, v_new.dedup_window_ms, v_new.retain_history, v_new.notify, v_new.notify_payload
        ) IS NOT DISTINCT FROM (
            v_row.pattern, v_row.max_concurrency, v_row.release_interval_ms, v_row.is_ordered,
            v_row.max_attempts, v_row.backoff_base_ms, v_row.backoff_factor, v_row.backoff_max_ms,
            v_row.backoff_jitter, v_row.dedup_window_ms, v_row.retain_history, v_row.notify, v_row.notify_payload
        );
        UPDATE @extschema@.channel AS c
        SET
            pattern = v_new.pattern,
            max_concurrency = v_new.max_concurrency,
            release_interval_ms = v_new.release_interval_ms,
            is_ordered = v_new.is_ordered,
            max_attempts = v_new.max_attempts,
            backoff_base_ms = v_new.backoff_base_ms,
            backoff_factor = v_new.backoff_factor,
            backoff_max_ms = v_new.backoff_max_ms,
            backoff_jitter = v_new.backoff_jitter,
            dedup_window_ms = v_new.dedup_window_ms,
            retain_history = v_new.retain_history,
            notify = v_new.notify,
            notify_payload = v_new.notify_payload
        WHERE c.id = v_row.id
        RETURNING c.* INTO v_new;
        IF (v_new.max_concurrency, v_new.release_interval_ms, v_new.is_ordered)
            IS DISTINCT FROM (v_row.max_concurrency, v_row.release_interval_ms, v_row.is_ordered) THEN
            PERFORM @extschema@._channel_readmit(v_new, p_bound, p_now);
        END IF;
        -- (A paused channel keeps its row: the pause is its own.)
        IF NOT @extschema@._channel_admits(v_new) THEN
            DELETE FROM @extschema@.channel AS c WHERE c.id = v_row.id;
        END IF;
    END LOOP;

    IF p_was_limited OR NOT @extschema@._channel_admits(
        COALESCE((SELECT f FROM @extschema@._channel_pattern_config(p_prefix) AS f), @extschema@._channel_defaults(p_prefix, 0))
    ) THEN
        RETURN;
    END IF;
    FOR v_name IN
        SELECT DISTINCT m.channel
        FROM @extschema@.message AS m
        WHERE m.position IS NOT NULL AND NOT m.is_admitted AND pg_catalog.starts_with(m.channel COLLATE "C", p_prefix)
    LOOP
        PERFORM @extschema@._channel_guard_exclusive(v_name);
        CONTINUE WHEN NOT @extschema@._channel_admits(
            @extschema@._channel_config(@extschema@._channel_id(v_name), v_name)
        ) OR EXISTS (
            SELECT 1 FROM @extschema@.channel AS c
            WHERE c.id = @extschema@._channel_id(v_name) AND c.name = v_name
        );
        v_row := @extschema@._channel_lock(v_name, p_now);
        PERFORM @extschema@._channel_readmit(v_row, p_bound, p_now);
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_pattern_apply(text, boolean, bigint, bigint) IS
'Internal: after a pattern was set or dropped, the channels under its prefix without their own configuration follow what now applies to them.';

REVOKE ALL ON FUNCTION @extschema@._channel_pattern_apply(text, boolean, bigint, bigint) FROM PUBLIC;
