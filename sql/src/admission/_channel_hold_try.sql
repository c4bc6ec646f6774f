-- Internal: whether a producer may put its message straight into held, as
-- the channel's admission would (a create into a channel its row says is
-- full: paused, or max_concurrency admitted, without a release interval).
-- Only at READ COMMITTED, and only with the channel's hold guard (advisory
-- (1819111686, hashint8(channel id))) held shared until the producer's
-- transaction ends, tried (a producer never waits), and only when a
-- statement begun after the guard was taken still reads the channel full
-- and p_dequeue_at at or after its admit_from (where admission's walk of
-- the held messages starts).  Else the producer creates its message waiting,
-- as before 0.15.0, and a dequeue's promotion holds it.  Why the guard: a
-- walk of the held messages (_channel_admit) that has room cannot see a held
-- message whose producer has not committed; it tries the guard
-- exclusively first, and with it every direct holder has committed and is
-- seen, and no other can start until it commits; without it, it leaves a
-- wake (_channel_admit), and raises no admit_from past a message it may
-- not see.  So no held message is ever left behind room (the isolation
-- spec hold_at_create.spec replays the race).  Saves the burst into
-- saturated channels its promotions: each dequeue promoted 8 of them
-- (3,000 saturated channels: 270 buffers a call against 44).
-- Parameters: p_channel_id, the channel's id; p_dequeue_at, the message's.
-- Returns: whether the message is to be created held.
-- Calls: _channel_row (inlined).
-- Tables: none (channel through _channel_row: channel_pkey, backwards,
--   newest version first).
-- Locks: advisory (1819111686, hashint8(p_channel_id)) shared, tried, until
--   the transaction ends (the hold guard).
CREATE FUNCTION @extschema@._channel_hold_try(p_channel_id bigint, p_dequeue_at bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed'
        OR NOT pg_catalog.pg_try_advisory_xact_lock_shared(1819111686, pg_catalog.hashint8(p_channel_id)) THEN
        RETURN FALSE;
    END IF;
    -- After the guard: a new statement, which sees every walk committed
    -- before it.
    RETURN COALESCE((
        SELECT
            c.release_interval_ms = 0 AND (c.is_paused OR c.num_admitted >= c.max_concurrency)
            AND p_dequeue_at >= c.admit_from
        FROM @extschema@._channel_row(p_channel_id, NULL) AS c
    ), FALSE);
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_hold_try(bigint, bigint) IS
'Internal: whether a producer may create its message held, its channel being full, under the channel''s hold guard (tried shared).';

REVOKE ALL ON FUNCTION @extschema@._channel_hold_try(bigint, bigint) FROM PUBLIC;
