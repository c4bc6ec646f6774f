-- Internal: raise a channel's floor_at (see the channel table).  The caller
-- holds the channel guard exclusively, in READ COMMITTED: no producer of
-- the channel is in flight, so every message put in the channel so far is
-- committed (or rolled back), and this statement's snapshot, taken after
-- the guard, sees it with its mark.  The new floor is the first message
-- visible (locked or not: a lock that expires is delivered from its
-- dequeue_at), walked from the old floor, or from the beginning when the
-- channel has marks; never above p_now - 1000, so that a producer whose
-- transaction began less than a second before it created its message
-- leaves no mark.  The marks are deleted in the same statement.
CREATE FUNCTION @extschema@._channel_floor_raise(
    p_channel_id bigint,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    WITH marks AS (
        DELETE FROM @extschema@.channel_floor_mark AS k
        WHERE k.channel_id = p_channel_id
        RETURNING k.channel_id
    )

    UPDATE @extschema@.channel AS c
    SET
        floor_at = pg_catalog.int8smaller(
            p_now - 1000,
            COALESCE(
                (
                    SELECT m.dequeue_at
                    FROM @extschema@.message AS m
                    WHERE
                        m.channel_id = p_channel_id
                        AND m.dequeue_at >= CASE
                            WHEN EXISTS (SELECT 1 FROM marks) THEN -9223372036854775808
                            ELSE COALESCE(c.floor_at, -9223372036854775808)
                        END
                    ORDER BY m.dequeue_at, m.id
                    LIMIT 1
                ),
                p_now - 1000
            )
        ),
        floor_checked_at = p_now
    WHERE c.id = p_channel_id;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_floor_raise(bigint, bigint) IS
'Internal: raise a channel''s floor_at to its first visible message (at most p_now - 1000) and delete its floor marks; the caller holds the channel guard exclusively.';

REVOKE ALL ON FUNCTION @extschema@._channel_floor_raise(bigint, bigint) FROM PUBLIC;
