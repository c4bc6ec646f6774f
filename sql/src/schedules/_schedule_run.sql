-- Internal: materialise up to p_limit due schedules, those whose key in
-- schedule_due_ix, greatest(next_at, set_at), is at least p_from (the
-- dequeue's due mark: every live key is at least it, see _marks_raise; tick()
-- passes the beginning, its safety net for a key left below the mark, by a
-- backward step of the clock beyond the raise's margin or a row written by
-- hand).  Each due schedule's row is locked (SKIP LOCKED: another worker has
-- it) and, in the same transaction, one message is created and next_at
-- advanced, so each period yields exactly one message whoever gets there
-- first.
--
-- Catch-up rule: when several periods were missed (no dequeue, no tick()), ONE
-- message is created, for the latest missed boundary (its dequeue_at), the
-- others are counted in schedule.num_missed, and next_at moves to the first
-- boundary after p_now: the schedule stays aligned to start_at and never
-- floods the channel after downtime.
--
-- The channel guard and a size-limited channel's quota row are only tried
-- (never waited for): a schedule whose channel is being reconfigured or
-- dropped, or written by a producer of a size-limited channel, right now is
-- left for the next caller.  The message goes through message_create (max_size
-- applies: a full channel misses that period).  The row is updated by the ctid
-- it was locked at: no walk of its versions by name (see the schedule table).
-- Parameters: p_now, the caller's clock (in its epoch: the next_at written is
--   above it, so the row's key); p_limit, at most this many schedules; p_from,
--   the least key read (the due mark, or the beginning).
-- Returns: how many messages were created.
-- Calls: _due_taken_note (the first schedule's key), _channel_guard_try_shared,
--   _channel_id, message_create.
-- Tables: reads schedule (schedule_due_ix, from p_from), channel_quota
--   (channel_quota_pkey, backwards: the newest version); writes schedule
--   (next_at and the counts, by ctid).  (message and the rest through
--   message_create.)
-- Locks: the due schedules' rows FOR UPDATE SKIP LOCKED, then updated; per
--   schedule, the channel guard (1819111681, or its bucket guard 1819111682)
--   tried shared, held until the transaction ends (_channel_guard_try_shared),
--   and a max_size channel's channel_quota row FOR UPDATE SKIP LOCKED; then
--   message_create's (the epoch's parity, 1819111690, shared; the guard and
--   the quota row, already held).
CREATE FUNCTION @extschema@._schedule_run(p_now bigint, p_limit integer, p_from bigint)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_schedule record;
    v_due bigint;
    v_missed bigint;
    v_created integer := 0;
    v_noted boolean := FALSE;
BEGIN
    FOR v_schedule IN
        SELECT s.ctid AS tid, s.channel, s.content, s.every_ms, s.next_at, GREATEST(s.next_at, s.set_at) AS due_key
        FROM @extschema@.schedule AS s
        WHERE
            GREATEST(s.next_at, s.set_at) >= p_from
            AND GREATEST(s.next_at, s.set_at) <= p_now
        ORDER BY GREATEST(s.next_at, s.set_at)
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        -- The first row has the least key: noted for a raise later in this
        -- transaction, which must not pass it (_due_taken_note).
        IF NOT v_noted THEN
            PERFORM @extschema@._due_taken_note(v_schedule.due_key);
            v_noted := TRUE;
        END IF;
        -- What message_create would wait for, the channel guard (held by a
        -- configuration change) and a size-limited channel's quota row, is
        -- only tried: a schedule whose channel is busy waits for a later
        -- call.
        CONTINUE WHEN NOT @extschema@._channel_guard_try_shared(v_schedule.channel);
        -- (Newest version first: a row every producer writes.)
        PERFORM 1
        FROM @extschema@.channel_quota AS q
        WHERE
            q.channel_id >= @extschema@._channel_id(v_schedule.channel)
            AND q.channel_id <= @extschema@._channel_id(v_schedule.channel)
        ORDER BY q.channel_id DESC LIMIT 1
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND AND EXISTS (
            SELECT 1 FROM @extschema@.channel_quota AS q WHERE q.channel_id = @extschema@._channel_id(v_schedule.channel)
        );
        v_missed := LEAST(pg_catalog.div(p_now::numeric - v_schedule.next_at, v_schedule.every_ms), 9223372036854775807);
        v_due := p_now - pg_catalog.mod(p_now::numeric - v_schedule.next_at, v_schedule.every_ms);
        IF @extschema@.message_create(v_schedule.channel, v_schedule.content, v_due) IS NOT NULL THEN
            v_created := v_created + 1;
        END IF;
        UPDATE @extschema@.schedule AS s
        SET
            next_at = v_due + v_schedule.every_ms, last_run_at = p_now, num_runs = s.num_runs + 1,
            num_missed = LEAST(s.num_missed::numeric + v_missed, 9223372036854775807)
        WHERE s.ctid = v_schedule.tid;
    END LOOP;
    RETURN v_created;
END;
$$;

COMMENT ON FUNCTION @extschema@._schedule_run(bigint, integer, bigint) IS
'Internal: create the messages of up to p_limit due schedules whose greatest(next_at, set_at) is at least p_from, one per schedule (missed periods coalesced); returns how many messages were created.';

REVOKE ALL ON FUNCTION @extschema@._schedule_run(bigint, integer, bigint) FROM PUBLIC;
