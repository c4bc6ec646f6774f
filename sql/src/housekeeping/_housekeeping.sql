-- Internal: the housekeeping of a worker's call and of tick(): what is due
-- apart from the take, through one entry point.  Its one rule: a dequeue
-- calls it, before its take, when its first statement found something
-- due: an entry of message_due_ix at or before the clock (from the due
-- mark), or the marks' turn (p_raise: a call whose transaction wrote
-- nothing before it, when _marks_turn_deliveries (8) messages or more
-- were delivered since the last raise).  In this order:
--   1. promotion, up to p_limit due messages, oldest first
--      (_message_promote): scheduled messages and schedules' occurrences
--      (_schedule_next), retries, defers, expired locks, dead letters, and
--      the admission of limited channels' messages (_channel_admit);
--   2. the marks' raise (_marks_raise), when p_raise: before the take, so
--      the transaction has taken no position its own read would miss; what
--      step 1 took out of the due view is noted (lonnymq.due_taken), and
--      the positions it placed its own read sees; p_take tells it how many
--      of the first ready positions the take that follows may consume.
-- Parameters: p_now, the caller's clock (read in its epoch); p_due_mark,
--   where the walk of message_due_ix starts (tick(): the beginning);
--   p_limit, at most this many due messages; p_raise, whether to raise the
--   marks (only when the caller's transaction wrote nothing before this
--   call: the caller says); p_take, how many of the round order's first
--   ready positions the caller's take may consume next (its p_limit; 0
--   for one channel's take, or none).
-- Returns: how many periodic messages were made (tick() reports it).
-- Calls: _epoch_enter, _message_promote, _marks_raise.
-- Tables: none (the callees').
-- Locks: the epoch's parity (1819111690) shared until the transaction ends
--   (_epoch_enter); then the callees', in this order: _message_promote's,
--   which only try or skip, then _marks_raise's, which only try.
CREATE FUNCTION @extschema@._housekeeping(
    p_now bigint,
    p_due_mark bigint,
    p_limit integer,
    p_raise boolean,
    p_take integer
)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_periodic integer;
BEGIN
    v_periodic := @extschema@._message_promote(p_now, p_due_mark, @extschema@._epoch_enter(), p_limit);
    IF p_raise THEN
        PERFORM @extschema@._marks_raise(p_now, p_take);
    END IF;
    RETURN v_periodic;
END;
$$;

COMMENT ON FUNCTION @extschema@._housekeeping(bigint, bigint, integer, boolean, integer) IS
'Internal: the housekeeping of a dequeue or tick(): promote what is due, then raise the marks.';

REVOKE ALL ON FUNCTION @extschema@._housekeeping(bigint, bigint, integer, boolean, integer) FROM PUBLIC;
