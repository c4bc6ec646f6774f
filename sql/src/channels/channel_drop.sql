-- Drop a channel.  Refuses (55006) while it holds messages unless p_purge,
-- which deletes them, locked ones included (their workers' tokens then go
-- stale), and its deduplication keys.  Its dead letters and history are
-- kept (they are filed by channel name), and so are schedules producing into
-- it, with their pending occurrences, which are not its messages yet: the
-- next period creates the channel again.  Waits for producers and
-- consumers in flight on the channel (its guard, its row lock, the locks
-- of the rows it deletes).  A pattern (a name ending in '*';
-- p_purge does nothing there) goes with its row: the channels that
-- followed it follow what applies to them without it
-- (_channel_pattern_apply).  A purge is a cancel for the messages that wait
-- for the purged ones: they are cancelled too, unless created with
-- p_after_mode 'ended' (_message_release: release rows).
-- Parameters: p_channel, the channel's or pattern's name; p_purge, whether
--   to delete the channel's messages with it.
-- Returns: TRUE when dropped; FALSE when there was nothing to drop (no row
--   and no messages; for a pattern, no row).
-- Calls: _check_channel_name, _channel_id, _channel_guard_exclusive,
--   _channel_row_lock, _channel_pattern_apply, _channel_admits,
--   _epoch_enter, _clock_ms, _message_release (purged messages with
--   dependents).
-- Tables: reads channel (channel_pkey), message (message_channel_ix: does
--   it hold any); writes message, message_key, channel_quota, channel (all
--   delete; message: the release rows).
-- Locks: advisory (1819111681, hashtext(name)) then (1819111682,
--   hashtext(name) & 31) exclusive until the transaction ends
--   (_channel_guard_exclusive); advisory (1819111683, hashint8(id))
--   exclusive until the transaction ends (_channel_row_lock); the channel's
--   row FOR UPDATE; the rows it deletes.  A pattern: the epoch's parity
--   (1819111690) shared (_epoch_enter) and the followers' locks
--   (_channel_pattern_apply).
CREATE FUNCTION @extschema@.channel_drop(
    p_channel text,
    p_purge boolean DEFAULT FALSE
)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channel_id bigint;
    v_pattern @extschema@.channel%ROWTYPE;
    v_dropped bigint[];
BEGIN
    PERFORM @extschema@._check_channel_name(p_channel);
    IF p_purge IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_purge must not be NULL'
            USING ERRCODE = '22004';
    END IF;

    v_channel_id := @extschema@._channel_id(p_channel);
    PERFORM @extschema@._channel_guard_exclusive(p_channel);
    PERFORM @extschema@._channel_row_lock(v_channel_id);
    -- A pattern: its followers follow what applies to them without it.
    IF pg_catalog.right(p_channel, 1) = '*' THEN
        DELETE FROM @extschema@.channel AS c
        WHERE c.id = v_channel_id AND c.name = p_channel
        RETURNING c.* INTO v_pattern;
        IF NOT FOUND THEN
            RETURN FALSE;
        END IF;
        PERFORM @extschema@._channel_pattern_apply(
            v_pattern.prefix, @extschema@._channel_admits(v_pattern), @extschema@._epoch_enter(), @extschema@._clock_ms()
        );
        RETURN TRUE;
    END IF;
    -- A channel exists while it has a row (configuration) or messages.
    PERFORM 1
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id AND c.name = p_channel
    FOR UPDATE;
    IF NOT FOUND AND NOT EXISTS (
        SELECT 1 FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel_id AND m.channel = p_channel AND m.schedule IS NULL
    ) THEN
        RETURN FALSE;
    END IF;

    IF NOT p_purge AND EXISTS (
        SELECT 1 FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel_id AND m.channel = p_channel AND m.schedule IS NULL
    ) THEN
        RAISE EXCEPTION 'lonnymq: channel "%" still holds messages', p_channel
            USING ERRCODE = '55006',
            HINT = 'Pass p_purge => true to delete them with the channel.';
    END IF;

    WITH gone AS (
        DELETE FROM @extschema@.message AS m
        WHERE m.channel_id = v_channel_id AND m.channel = p_channel AND m.schedule IS NULL
        RETURNING m.id, m.has_dependents
    )

    SELECT pg_catalog.array_agg(g.id) FILTER (WHERE g.has_dependents) INTO v_dropped
    FROM gone AS g;
    -- The messages others wait for: their dependents are cancelled too (a
    -- purge is a cancel), through release rows (_message_release).
    PERFORM @extschema@._message_release(
        pg_catalog.array_agg(g.id ORDER BY g.id), pg_catalog.array_agg(v_channel_id), pg_catalog.array_agg(p_channel),
        'cancelled'
    )
    FROM pg_catalog.unnest(v_dropped) AS g (id)
    HAVING pg_catalog.count(*) > 0;
    DELETE FROM @extschema@.message_key AS k WHERE k.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel_quota AS q WHERE q.channel_id = v_channel_id;
    DELETE FROM @extschema@.channel AS c WHERE c.id = v_channel_id;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.channel_drop(text, boolean) IS
'Drop a channel and its settings. Returns false when it does not exist; raises 55006 while it holds messages unless p_purge is true.';

REVOKE ALL ON FUNCTION @extschema@.channel_drop(text, boolean) FROM PUBLIC;
