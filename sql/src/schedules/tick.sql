-- Housekeeping for deployments that want it on a clock (pg_cron:
-- SELECT cron.schedule('lonnymq', '* * * * *', 'SELECT lonnymq.tick()')).
-- The take (message_dequeue, message_complete_dequeue) does most of this
-- work as it goes, from the due mark, and keyed creates delete ended claims
-- two at a time; tick() covers a quiet queue and what the take skips.  It
-- runs the housekeeping (_housekeeping) from the beginning of
-- message_due_ix, not from the due mark, so that a message a backward step
-- of the server's clock put below the mark is not left there: up to 10000
-- due messages promoted (scheduled, periodic, retried, deferred, expired
-- locks; one whose channel is busy right now, or a schedule's occurrence
-- whose schedule's row another call holds, is left for later), then the
-- marks' raise when its transaction wrote nothing before it.  Then it
-- deletes up to 10000 ended deduplication claims and the rows of up to
-- 10000 pattern followers that drained inside their release interval
-- (_channel_admit keeps those until it has passed; one whose row lock
-- another call holds is left for the next call).
-- Parameters: none.
-- Returns: how many periodic messages it made.
-- Calls: _epoch_enter, _clock_ms, _housekeeping, _message_key_reap,
--   _channel_row_try_lock.
-- Tables: reads channel (followers' rows, channel_pattern_ix); writes channel
--   (deletes drained followers' rows).  (schedule, message, dead_letter and
--   message_key through _housekeeping and _message_key_reap.)
-- Locks: the epoch's parity (1819111690) shared until the transaction ends
--   (_epoch_enter, before the clock is read); _housekeeping's, which only
--   try or skip (due messages and schedule rows FOR UPDATE SKIP LOCKED,
--   channel guards, channel row locks and the raise's locks tried);
--   _message_key_reap's (ended claims FOR UPDATE SKIP LOCKED); for each
--   drained follower, advisory (1819111683, hashint8(channel id)) tried
--   exclusively, held until the transaction ends (_channel_row_try_lock),
--   then its row deleted.
CREATE FUNCTION @extschema@.tick()
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_may_raise boolean := pg_catalog.pg_current_xact_id_if_assigned() IS NULL;
    v_now bigint;
    v_created integer := 0;
BEGIN
    PERFORM @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    -- Due messages and schedules' occurrences, from the beginning of
    -- message_due_ix (not from the due mark): also one that a backward step
    -- of the clock left below it; then the marks' raise, when this
    -- transaction wrote nothing before (as a dequeue's).
    v_created := @extschema@._housekeeping(v_now, -9223372036854775808, 10000, v_may_raise, 0);
    -- Ended claims, up to 10000 in one statement (_message_key_reap).
    PERFORM @extschema@._message_key_reap(v_now, 10000);
    -- Rows of pattern followers that drained inside their release interval
    -- (_channel_admit keeps them until it has passed), up to 10000; one
    -- whose row lock another call holds is left for the next call.
    DELETE FROM @extschema@.channel AS c
    WHERE c.id = ANY(ARRAY(
        SELECT f.id
        FROM @extschema@.channel AS f
        WHERE f.pattern IS NOT NULL AND f.num_admitted = 0 AND NOT f.is_paused AND f.release_at <= v_now
        LIMIT 10000
    ))
    AND @extschema@._channel_row_try_lock(c.id)
    AND c.num_admitted = 0 AND NOT c.is_paused AND c.release_at <= v_now;
    RETURN v_created;
END;
$$;

COMMENT ON FUNCTION @extschema@.tick() IS
'Housekeeping for pg_cron (optional): promote due messages, periodic ones among them, raise the marks, and delete expired deduplication claims. Returns how many periodic messages were made.';

REVOKE ALL ON FUNCTION @extschema@.tick() FROM PUBLIC;
