-- Internal: a consumer holding a channel's row (FOR NO KEY UPDATE) found
-- nothing it could deliver from it.  Decide where the channel goes:
--   * at max_concurrency: wait for its first lock to expire (or a complete);
--   * deliverable messages exist but other transactions hold them right
--     now: the back of the rotation;
--   * empty, or nothing before some future time: out of the rotation, or
--     waiting for that time.  Saying so needs the channel guard exclusively,
--     which no producer in flight (holding it shared) allows; once it is
--     held, every producer's message is either committed and seen by the
--     fresh probe below, or that producer will see wait_at and leave a
--     wake-up.
--   * a producer is in flight: the back of the rotation, looked at again.
-- The fresh probe needs READ COMMITTED (a new snapshot per statement).  Under
-- REPEATABLE READ or SERIALIZABLE the caller's snapshot may predate a
-- producer's commit, so such a caller never declares a channel empty or
-- waiting: it only sends it to the back of the rotation.
CREATE FUNCTION @extschema@._channel_nothing_ready(
    p_channel @extschema@.channel,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_head bigint;
BEGIN
    IF p_channel.num_locked >= p_channel.max_concurrency THEN
        SELECT m.dequeue_at INTO v_head
        FROM @extschema@.message AS m
        WHERE m.channel_id = p_channel.id AND m.is_locked AND m.is_counted
        ORDER BY m.dequeue_at, m.id
        LIMIT 1;
        -- Nothing locked at all although the counter says the channel is
        -- full: the counter is wrong; repair it rather than stall.
        UPDATE @extschema@.channel AS c
        SET
            num_locked = CASE WHEN v_head IS NULL THEN 0 ELSE c.num_locked END,
            next_at = COALESCE(v_head, p_now),
            turn = pg_catalog.nextval('@extschema@.channel_turn_seq')
        WHERE c.id = p_channel.id;
        RETURN;
    END IF;

    SELECT m.dequeue_at INTO v_head
    FROM @extschema@.message AS m
    WHERE m.channel_id = p_channel.id
    ORDER BY m.dequeue_at, m.id
    LIMIT 1;
    IF (v_head IS NULL OR v_head > p_now)
        AND pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        v_head := p_now;
    ELSIF v_head IS NULL OR v_head > p_now THEN
        IF @extschema@._channel_guard_try_exclusive(p_channel.name) THEN
            SELECT m.dequeue_at INTO v_head
            FROM @extschema@.message AS m
            WHERE m.channel_id = p_channel.id
            ORDER BY m.dequeue_at, m.id
            LIMIT 1;
        ELSE
            v_head := p_now;
        END IF;
    END IF;

    IF v_head IS NULL THEN
        UPDATE @extschema@.channel AS c
        SET
            next_at = NULL,
            turn = NULL,
            wait_at = 9223372036854775807
        WHERE c.id = p_channel.id;
    ELSIF v_head > p_now THEN
        UPDATE @extschema@.channel AS c
        SET
            next_at = GREATEST(
                v_head,
                COALESCE(c.last_served_at + c.release_interval_ms, v_head)
            ),
            turn = pg_catalog.nextval('@extschema@.channel_turn_seq'),
            wait_at = v_head
        WHERE c.id = p_channel.id;
    ELSE
        UPDATE @extschema@.channel AS c
        SET
            next_at = p_now,
            turn = pg_catalog.nextval('@extschema@.channel_turn_seq')
        WHERE c.id = p_channel.id;
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_nothing_ready(@extschema@.channel, bigint) IS
'Internal: move a channel that had nothing deliverable to its right place: waiting, out of the rotation, or the back of it.';

REVOKE ALL ON FUNCTION @extschema@._channel_nothing_ready(@extschema@.channel, bigint) FROM PUBLIC;
