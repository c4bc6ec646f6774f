-- Internal: a schedule's pending occurrence p_id (a scheduled message whose
-- schedule column names its schedule) has come due in a promotion
-- (_message_promote): create the following occurrence, and make this one
-- the schedule's message of its boundary, which the promotion then places
-- or holds like any scheduled message.
-- Catch-up rule: when several boundaries passed since p_at (no dequeue, no
-- tick()), ONE message is delivered, at the latest of them (its
-- dequeue_at); the others are counted in num_missed, and the following
-- occurrence is at the first boundary after p_now: the schedule stays
-- aligned to start_at and never floods its channel after downtime.
-- A max_size channel counts the message from its boundary on (a pending
-- occurrence is not counted): when the channel is full, the occurrence is
-- deleted, that boundary's message lost (num_runs counts it), and the
-- schedule goes on.  The schedule's row and the channel's quota row are
-- only tried: when either is busy (schedule_set, a producer) the
-- occurrence is left due for a later call, and a promotion never waits.
-- An occurrence whose schedule is gone, or which is not its schedule's
-- (occurrence_id: a row written by hand), is deleted: nothing is left due
-- for ever.
-- Parameters: p_id, the occurrence; p_name, its schedule; p_at, its
--   boundary (its dequeue_at, at or before p_now: it is due); p_channel, its
--   channel's configuration (_channel_config: id is the channel's id);
--   p_now, the promoting call's clock, read in its epoch.
-- Returns: the boundary it is delivered at (its new dequeue_at); NULL: left
--   due (busy), or deleted (lost to a full channel, or a stray).
-- Calls: _channel_quota_take.
-- Tables: reads schedule (schedule_name_ix, backwards: newest version
--   first), channel_quota (channel_quota_pkey, backwards: a max_size
--   channel's quota row); writes message (the following occurrence
--   inserted; this one updated, or deleted), schedule (next_at, the counts
--   and occurrence_id, by ctid), messages_created_seq (nextval) (the
--   quota through _channel_quota_take).
-- Locks: the schedule's row FOR UPDATE SKIP LOCKED, which it updates; a
--   max_size channel's quota row FOR UPDATE SKIP LOCKED, then
--   _channel_quota_take's (the same row, held already).  The caller holds
--   the occurrence's row (FOR UPDATE SKIP LOCKED) and the channel guard:
--   schedule_set and schedule_drop take the schedule's row, then wait for
--   the occurrence's; this takes the occurrence's, then only tries the
--   schedule's: no cycle.
CREATE FUNCTION @extschema@._schedule_next(
    p_id bigint,
    p_name text,
    p_at bigint,
    p_channel @extschema@.channel,
    p_now bigint
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_schedule record;
    v_due bigint;
    v_next bigint;
BEGIN
    -- (Newest version first: a row updated once a period, which an old
    -- snapshot keeps every version of.)
    SELECT s.ctid AS tid, s.channel, s.content, s.every_ms, s.occurrence_id INTO v_schedule
    FROM @extschema@.schedule AS s
    WHERE s.name >= p_name AND s.name <= p_name
    ORDER BY s.name DESC
    LIMIT 1
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM @extschema@.schedule AS s WHERE s.name = p_name) THEN
        RETURN NULL;
    END IF;
    IF v_schedule.occurrence_id IS DISTINCT FROM p_id THEN
        DELETE FROM @extschema@.message AS m WHERE m.id = p_id;
        RETURN NULL;
    END IF;
    IF p_channel.max_size IS NOT NULL THEN
        PERFORM 1
        FROM @extschema@.channel_quota AS q
        WHERE q.channel_id >= p_channel.id AND q.channel_id <= p_channel.id
        ORDER BY q.channel_id DESC
        LIMIT 1
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND AND EXISTS (SELECT 1 FROM @extschema@.channel_quota AS q WHERE q.channel_id = p_channel.id) THEN
            RETURN NULL;
        END IF;
    END IF;
    v_due := p_now - pg_catalog.mod(p_now::numeric - p_at, v_schedule.every_ms);
    -- The following occurrence: scheduled, in the epoch the caller entered
    -- before it read p_now (its key, greatest(dequeue_at, created_at), is
    -- above the due mark).
    INSERT INTO @extschema@.message (channel_id, channel, dequeue_at, created_at, content, schedule)
    VALUES (p_channel.id, v_schedule.channel, v_due + v_schedule.every_ms, p_now, v_schedule.content, p_name)
    RETURNING id INTO v_next;
    UPDATE @extschema@.schedule AS s
    SET
        next_at = v_due + v_schedule.every_ms, last_run_at = p_now, num_runs = s.num_runs + 1,
        num_missed = LEAST(
            s.num_missed::numeric + pg_catalog.div(v_due::numeric - p_at, v_schedule.every_ms), 9223372036854775807
        ),
        occurrence_id = v_next
    WHERE s.ctid = v_schedule.tid;
    IF p_channel.max_size IS NOT NULL AND @extschema@._channel_quota_take(p_channel.id, p_channel.max_size, 1) = 0 THEN
        DELETE FROM @extschema@.message AS m WHERE m.id = p_id;
        RETURN NULL;
    END IF;
    -- A message of its channel from now on, created now (counted,
    -- lonnymq_messages_created_total: a sequence, no row).
    UPDATE @extschema@.message AS m
    SET schedule = NULL, dequeue_at = v_due, created_at = p_now
    WHERE m.id = p_id AND pg_catalog.nextval('@extschema@.messages_created_seq') > 0;
    -- Deliverable now: its channel's notification, as a producer's would be.
    IF p_channel.notify AND NOT p_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', COALESCE(p_channel.notify_payload, v_schedule.channel));
    END IF;
    RETURN v_due;
END;
$$;

COMMENT ON FUNCTION @extschema@._schedule_next(bigint, text, bigint, @extschema@.channel, bigint) IS
'Internal: a schedule''s pending occurrence came due: create the following one, and make this one the message of the latest boundary passed (NULL: left due, or deleted).';

REVOKE ALL ON FUNCTION @extschema@._schedule_next(bigint, text, bigint, @extschema@.channel, bigint) FROM PUBLIC;
