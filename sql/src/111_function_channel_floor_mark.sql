-- Internal: called by whoever puts a message in a channel at p_at (its
-- dequeue_at), holding the channel guard shared, with the channel's
-- floor_at as read after taking the guard.  A message below the floor
-- leaves a mark, so that batch dequeues walk the channel from the beginning
-- until the next floor raise has seen it.  Under REPEATABLE READ or
-- SERIALIZABLE the channel row came from the transaction's snapshot, which
-- may predate a raise: leave a mark whatever it said.
CREATE FUNCTION @extschema@._channel_floor_mark(
    p_channel_id bigint,
    p_floor_at bigint,
    p_at bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        IF p_floor_at IS NULL OR p_at >= p_floor_at THEN
            RETURN;
        END IF;
        -- One mark is enough: a raise cannot take a committed mark away
        -- while this transaction holds the guard shared.
        INSERT INTO @extschema@.channel_floor_mark (channel_id, marked_at)
        SELECT p_channel_id, p_at
        WHERE NOT EXISTS (
            SELECT 1
            FROM @extschema@.channel_floor_mark AS k
            WHERE k.channel_id = p_channel_id
        );
    ELSE
        -- The snapshot may still show a mark that a raise has deleted.
        INSERT INTO @extschema@.channel_floor_mark (channel_id, marked_at)
        VALUES (p_channel_id, p_at);
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_floor_mark(bigint, bigint, bigint) IS
'Internal: leave a channel_floor_mark when a message is put below its channel''s floor_at (or the floor may have been read from an old snapshot).';

REVOKE ALL ON FUNCTION @extschema@._channel_floor_mark(bigint, bigint, bigint) FROM PUBLIC;
