-- Internal: end a waiting message because its parent p_parent ended without
-- completing and it waits for completions (after_mode 'completed',
-- doc/dependencies.md): p_outcome 'dead', it becomes a dead letter whose
-- last error names the parent (counted in
-- lonnymq_messages_dead_lettered_total, redrivable: dead_letter.after keeps
-- its parents); 'cancelled', it is deleted as message_cancel deletes it (its
-- key released at once).  A max_size channel counts it removed; its counts
-- go (message_wait; a redrive with its id makes new ones), the dead
-- letter keeping its parents and mode.  Its own dependents
-- follow through its release row (_message_bury, _message_release).  A
-- message that no longer waits (cancelled, or its channel dropped,
-- meanwhile) is left alone.  Lock order as message_cancel's: the channel
-- guard and, for a channel with limits or max_size, its row lock, then the
-- message row.
-- Parameters: p_child, the waiting message; p_parent, the parent whose end
--   ends it (named in the dead letter's error); p_outcome, 'dead' or
--   'cancelled'; p_now, the caller's clock.
-- Returns: nothing.
-- Calls: _message_channel, _message_bury, _message_key_release,
--   _channel_removed, _message_release.
-- Tables: reads message (the child, by message_pkey); writes message
--   (delete), message_wait (delete, by its key), dead_letter (its parents
--   and mode) (dead_letter, message_key and channel through the
--   callees).
-- Locks: _message_channel's (the channel guard 1819111681 shared, and the
--   channel row lock 1819111683 of a channel with limits or max_size, until
--   the transaction ends); the message row FOR UPDATE, then deleted.
CREATE FUNCTION @extschema@._message_dependent_end(p_child bigint, p_parent bigint, p_outcome text, p_now bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel%ROWTYPE;
    v_child record;
    v_wait record;
BEGIN
    v_channel := @extschema@._message_channel(p_child);
    IF v_channel.id IS NULL THEN
        RETURN;
    END IF;
    SELECT m.channel_id, m.channel INTO v_child
    FROM @extschema@.message AS m
    WHERE m.id = p_child AND m.schedule IS NULL
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Waiting still (its own count is there), under its row lock.
    WITH gone AS (
        DELETE FROM @extschema@.message_wait AS w
        WHERE w.child_id = p_child
        RETURNING w.bucket, w.after, w.after_mode
    )

    SELECT g.after, g.after_mode INTO v_wait
    FROM gone AS g
    WHERE g.bucket = -1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF p_outcome = 'dead' THEN
        PERFORM @extschema@._message_bury(
            p_child, v_child.channel_id, v_child.channel,
            pg_catalog.format('lonnymq: parent %s was dead-lettered', p_parent), p_now, v_channel.dedup_window_ms
        );
        UPDATE @extschema@.dead_letter AS d
        SET after = v_wait.after, after_mode = v_wait.after_mode
        WHERE d.id = p_child;
        RETURN;
    END IF;
    DELETE FROM @extschema@.message AS m
    WHERE m.id = p_child
    RETURNING m.key, m.has_dependents INTO v_child;
    IF v_child.key IS NOT NULL THEN
        PERFORM @extschema@._message_key_release(v_channel.id, v_child.key, p_child, 0, 0);
    END IF;
    PERFORM @extschema@._channel_removed(ARRAY[v_channel.id]);
    IF v_child.has_dependents THEN
        PERFORM @extschema@._message_release(ARRAY[p_child], ARRAY[v_channel.id], ARRAY[v_channel.name], 'cancelled');
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_dependent_end(bigint, bigint, text, bigint) IS
'Internal: a waiting message whose parent died or was cancelled dies (a dead letter naming the parent) or is cancelled with it.';

REVOKE ALL ON FUNCTION @extschema@._message_dependent_end(bigint, bigint, text, bigint) FROM PUBLIC;
