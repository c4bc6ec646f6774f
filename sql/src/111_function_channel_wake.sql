-- Internal: called by a producer (or a defer) holding the channel guard
-- shared, after writing a message that becomes deliverable at p_ready_at.  If
-- a consumer has found the channel with nothing deliverable before
-- p_wait_at, and this message is earlier, leave a wake-up unless an earlier
-- one is already pending.  Inserting never blocks: the channel row is not
-- written.
CREATE FUNCTION @extschema@._channel_wake(
    p_channel_id bigint,
    p_wait_at bigint,
    p_ready_at bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    -- Under REPEATABLE READ or SERIALIZABLE the channel row was read from the
    -- transaction's snapshot, which may predate a consumer declaring the
    -- channel empty: leave a wake-up whatever it said.
    IF (p_wait_at IS NULL OR p_ready_at >= p_wait_at)
        AND pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        RETURN;
    END IF;
    -- One statement: the wake-up, unless one as early is pending.
    INSERT INTO @extschema@.channel_wake (channel_id, wake_at)
    SELECT p_channel_id, p_ready_at
    WHERE NOT EXISTS (
        SELECT 1
        FROM @extschema@.channel_wake AS w
        WHERE w.channel_id = p_channel_id AND w.wake_at <= p_ready_at
    );
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_wake(bigint, bigint, bigint) IS
'Internal: leave a wake-up for a waiting channel when a new message is deliverable before it would be looked at.';

REVOKE ALL ON FUNCTION @extschema@._channel_wake(bigint, bigint, bigint) FROM PUBLIC;
