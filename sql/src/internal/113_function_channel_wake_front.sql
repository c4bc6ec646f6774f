-- Internal: the channels of the first 8 due wake-ups (typically ones that
-- another consumer is applying at this instant) that are neither paused
-- nor eligible already, nor in p_seen; only p_channel's when it is given.
-- message_dequeue serves them after a short front, once it has applied
-- wake-ups itself.  STABLE, so that it reads the calling statement's
-- snapshot, and a function rather than a sub-select of that statement:
-- every call of the statement would otherwise initialise its five plan
-- nodes, which it needs only after wake-ups.  SQL: planned when called,
-- which is rare.
CREATE FUNCTION @extschema@._channel_wake_front(
    p_now bigint,
    p_seen bigint[],
    p_channel text
)
RETURNS @extschema@.channel[]
LANGUAGE sql STABLE
AS $$
    SELECT ARRAY(
        SELECT c
        FROM @extschema@.channel AS c
        WHERE
            c.id IN (
                SELECT w.channel_id
                FROM @extschema@.channel_wake AS w
                WHERE w.wake_at <= p_now
                ORDER BY w.wake_at, w.id
                LIMIT 8
            )
            AND NOT c.is_paused AND NOT COALESCE(c.next_at <= p_now, FALSE) AND c.id <> ALL(p_seen)
            AND c.name = COALESCE(p_channel, c.name)
    )
$$;

COMMENT ON FUNCTION @extschema@._channel_wake_front(bigint, bigint[], text) IS
'Internal: the channels of the first due wake-ups, not paused nor eligible already, for message_dequeue after it applied wake-ups.';

REVOKE ALL ON FUNCTION @extschema@._channel_wake_front(bigint, bigint[], text) FROM PUBLIC;
