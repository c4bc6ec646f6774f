-- Internal: leave a wake for a channel, unless the one it left last is
-- still pending (0.15.0).  A wake is a message row whose schedule is ''
-- (no message), due 10 ms on in message_due_ix (by the clock, as every
-- writer of that index), which a dequeue's promotion finds with its usual
-- probe and runs the channel's admission walk for, under the hold guard,
-- and then deletes (_message_promote, _channel_admit).  Left after a walk
-- that may have missed a held message: one without the hold guard, or
-- outside READ COMMITTED (_channel_admit, _channel_readmit).  One pending
-- wake per channel, found by its id, which the channel row keeps
-- (wake_id): one probe of message_pkey, where a search of the channel's
-- wakes would walk all its messages that are not ready.
-- Parameters: p_channel_id, p_channel, the channel's id and name;
--   p_wake_id, its row's wake_id (NULL: none left yet).
-- Returns: the id of the channel's pending wake (this one's, or the last
--   one's), for its row's wake_id.
-- Calls: _clock_ms.
-- Tables: reads message (message_pkey: the last wake); writes message (the
--   wake, inserted), message_id_seq (its id, nextval).
-- Locks: none of its own.  The caller holds the channel's row lock
--   (1819111683) and its row, so no other wake of it is left meanwhile,
--   and has entered the epoch (_epoch_enter), as every writer of
--   message_due_ix has.
CREATE FUNCTION @extschema@._channel_wake(p_channel_id bigint, p_channel text, p_wake_id bigint)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
    WITH wake AS (
        INSERT INTO @extschema@.message (id, channel_id, channel, dequeue_at, created_at, content, schedule)
        SELECT pg_catalog.nextval('@extschema@.message_id_seq'), p_channel_id, p_channel, w.at, w.at, '', ''
        FROM (SELECT @extschema@._clock_ms() + 10 AS at) AS w
        WHERE NOT EXISTS (SELECT FROM @extschema@.message AS x WHERE x.id = p_wake_id)
        RETURNING id
    )

    SELECT COALESCE((SELECT wake.id FROM wake), p_wake_id)
$$;

COMMENT ON FUNCTION @extschema@._channel_wake(bigint, text, bigint) IS
'Internal: leave a wake for a channel (a due row that runs its admission walk again), unless its last one is still pending; returns the pending wake''s id.';

REVOKE ALL ON FUNCTION @extschema@._channel_wake(bigint, text, bigint) FROM PUBLIC;
