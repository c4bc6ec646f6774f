-- Internal: leave a wake for a channel, unless the one it left last is
-- still pending (0.15.0).  A wake is a message row whose schedule is ''
-- (no message), due at p_at in message_due_ix, which a dequeue's promotion
-- finds with its usual probe and runs the channel's admission walk for,
-- under the hold guard, and then deletes (_message_promote,
-- _channel_admit).  Left 10 ms on after a walk that may have missed a held
-- message: one without the hold guard, or outside READ COMMITTED
-- (_channel_admit, _channel_readmit); and at the end of a channel's release
-- interval after a delivery (_channel_release): the take admits nothing.
-- A pending wake, due earlier, runs the walk all the same.  One pending
-- wake per channel, found by its id, which the channel row keeps
-- (wake_id): one probe of message_pkey, where a search of the channel's
-- wakes would walk all its messages that are not ready.
-- Parameters: p_channel_id, p_channel, the channel's id and name;
--   p_wake_id, its row's wake_id (NULL: none left yet); p_at, when it is
--   due (epoch ms, from the clock read in the caller's epoch).
-- Returns: the id of the channel's pending wake (this one's, or the last
--   one's), for its row's wake_id.
-- Calls: none.
-- Tables: reads message (message_pkey: the last wake); writes message (the
--   wake, inserted), message_id_seq (its id, nextval).
-- Locks: none of its own.  The caller holds the channel's row lock
--   (1819111683) and its row, so no other wake of it is left meanwhile,
--   and has entered the epoch (_epoch_enter), as every writer of
--   message_due_ix has.
CREATE FUNCTION @extschema@._channel_wake(p_channel_id bigint, p_channel text, p_wake_id bigint, p_at bigint)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
    WITH wake AS (
        INSERT INTO @extschema@.message (id, channel_id, channel, dequeue_at, created_at, content, schedule)
        SELECT pg_catalog.nextval('@extschema@.message_id_seq'), p_channel_id, p_channel, p_at, p_at, '', ''
        WHERE NOT EXISTS (SELECT FROM @extschema@.message AS x WHERE x.id = p_wake_id)
        RETURNING id
    )

    SELECT COALESCE((SELECT wake.id FROM wake), p_wake_id)
$$;

COMMENT ON FUNCTION @extschema@._channel_wake(bigint, text, bigint, bigint) IS
'Internal: leave a wake for a channel (a due row that runs its admission walk again), unless its last one is still pending; returns the pending wake''s id.';

REVOKE ALL ON FUNCTION @extschema@._channel_wake(bigint, text, bigint, bigint) FROM PUBLIC;
