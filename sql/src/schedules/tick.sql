-- Housekeeping for deployments that want it on a clock (pg_cron:
-- SELECT cron.schedule('lonnymq', '* * * * *', 'SELECT lonnymq.tick()')).
-- Nothing depends on it: message_dequeue does the same work as it goes.
-- Materialises every due schedule (up to 10000 per call; one whose channel
-- is busy right now is left for the next call), promotes up to 10000 due
-- messages (scheduled, retried, deferred, expired locks) from the beginning
-- of message_due_ix, not from the due mark, so that one a backward step of
-- the server's clock put below the mark is not left there, and deletes up
-- to 10000 expired deduplication claims and the rows of up to 10000
-- pattern followers that drained inside their release interval.  Returns how many periodic messages
-- it created.  A busy schedule (locked by a worker) is left to that worker.
CREATE FUNCTION @extschema@.tick()
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bound bigint;
    v_now bigint;
    v_created integer := 0;
BEGIN
    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    -- Every due schedule (up to 10000 a call), one pass: a schedule whose
    -- channel is busy right now is skipped and left for the next call.
    v_created := @extschema@._schedule_run(v_now, 10000, -9223372036854775808);
    -- Due messages, from the beginning of message_due_ix (not from the due
    -- mark): also one that a backward step of the clock left below it.
    PERFORM @extschema@._message_promote(v_now, -9223372036854775808, v_bound, 10000);
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
'Housekeeping for pg_cron (optional): create due periodic messages and delete expired deduplication claims. Returns how many periodic messages were created.';

REVOKE ALL ON FUNCTION @extschema@.tick() FROM PUBLIC;
