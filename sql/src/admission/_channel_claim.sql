-- Internal: a take's claim for a turn of a channel whose takes claim
-- (_channel_claims), whose holder holds no claim: called once per such
-- turn by the take's head (message_complete_dequeue), which has the
-- holder's row locked, on the newest version it locked.  Tries the channel
-- row lock (never waits; busy: FALSE, nothing written).  With it, a new
-- statement (it sees every writer of the row that committed before the
-- lock was had) counts the claim in the row, newest version first, when
-- num_admitted is below max_concurrency: TRUE.  A channel that follows a
-- pattern and has no row yet gets its row here, with the claim counted
-- (_channel_admit deletes it when its counts are back to nothing).  A
-- full channel: the take holds the holder (the take then leaves it, its
-- predicate being FALSE), lowers admit_from to it, and returns FALSE; a
-- completion's admission (_channel_admit) puts it back in the round order,
-- unclaimed.  A channel whose configuration no longer claims (a pattern
-- changed under a row-less follower) has nothing to count: TRUE.
-- Parameters: p_id, the turn's holder; p_channel_id, its channel;
--   p_dequeue_at, its dequeue_at.
-- Returns: whether the take may deliver the holder.
-- Calls: _channel_row_try_lock, _channel_pattern_config,
--   _channel_claims, _clock_ms (a follower row's created_at).
-- Tables: reads channel (channel_pkey, backwards: newest version first),
--   message (a row-less follower's name, by message_pkey); writes channel
--   (num_admitted, admit_from; a follower's row, inserted), message (the
--   holder, held); the setting lonnymq.refused (the refused holders' ids,
--   which the take takes again past).
-- Locks: advisory (1819111683, hashint8(p_channel_id)) tried, until the
--   transaction ends (the channel row lock); the channel row by its
--   update.  The holder's row is the caller's (FOR UPDATE).
CREATE FUNCTION @extschema@._channel_claim(p_id bigint, p_channel_id bigint, p_dequeue_at bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_channel @extschema@.channel;
    v_tid tid;
BEGIN
    IF @extschema@._channel_row_try_lock(p_channel_id) THEN
        UPDATE @extschema@.channel AS c
        SET num_admitted = c.num_admitted + 1
        WHERE
            c.ctid = (
                SELECT r.ctid FROM @extschema@.channel AS r
                WHERE r.id >= p_channel_id AND r.id <= p_channel_id
                ORDER BY r.id DESC LIMIT 1
            )
            AND (c.num_admitted < c.max_concurrency OR NOT @extschema@._channel_claims(c));
        IF FOUND THEN
            RETURN TRUE;
        END IF;
        -- No row (a pattern's follower), or full.  (Newest version first,
        -- as above: the row's version to write, when it is full.)
        SELECT r.ctid INTO v_tid FROM @extschema@.channel AS r
        WHERE r.id >= p_channel_id AND r.id <= p_channel_id
        ORDER BY r.id DESC LIMIT 1;
        IF v_tid IS NULL THEN
            -- (The channel's name, by the holder's primary key: only here.)
            SELECT f.* INTO v_channel
            FROM @extschema@.message AS m
            CROSS JOIN LATERAL @extschema@._channel_pattern_config(m.channel) AS f
            WHERE m.id = p_id;
            IF NOT COALESCE(@extschema@._channel_claims(v_channel), FALSE) THEN
                RETURN TRUE;
            END IF;
            v_channel.num_admitted := 1;
            v_channel.created_at := @extschema@._clock_ms();
            INSERT INTO @extschema@.channel SELECT v_channel.* ON CONFLICT DO NOTHING;
            RETURN FOUND;
        END IF;
        UPDATE @extschema@.message AS m SET position = NULL, is_early = FALSE, is_held = TRUE WHERE m.id = p_id;
        UPDATE @extschema@.channel AS c
        SET admit_from = p_dequeue_at
        WHERE c.ctid = v_tid AND c.admit_from > p_dequeue_at;
    END IF;
    -- Refused (a busy row lock, or held): the take takes again, past it
    -- (message_complete_dequeue reads and clears the list).
    PERFORM pg_catalog.set_config(
        'lonnymq.refused',
        (COALESCE(NULLIF(pg_catalog.current_setting('lonnymq.refused', TRUE), ''), '{}')::bigint[] || p_id)::text,
        TRUE
    );
    RETURN FALSE;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_claim(bigint, bigint, bigint) IS
'Internal: a take''s claim of a unit of its channel''s max_concurrency for a turn''s holder; a full channel''s holder is held.';

REVOKE ALL ON FUNCTION @extschema@._channel_claim(bigint, bigint, bigint) FROM PUBLIC;
