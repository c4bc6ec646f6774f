-- A channel's messages: its ready places in round order (position set), and
-- after them its other messages (position NULL: scheduled, locked, held).
--   * its last ready place: a producer places a message at least one round
--     after it, so a channel has one delivery per round;
--   * its first ready place: a priority message shares it; a take moves the
--     other message of a shared place on;
--   * message_dequeue(p_channel => ...) takes its first places, ties in a
--     shared place by (dequeue_at, id);
--   * the administrative calls that read or change all of a channel's
--     messages (channel_set, channel_pause, channel_resume, channel_drop,
--     channel_stats) read only that channel's range.
-- Every probe of ready places starts at the position mark (or the
-- writers' bound): entries below it are consumed, and under a held
-- snapshot they stay in the index.  NULLS FIRST: a channel's messages that
-- are not ready (scheduled, locked, held) come before its places, so that a
-- probe of its last place (a backward scan from the end of the channel's
-- range) meets a place first instead of stepping over all of them; the
-- probes write the same ordering (position DESC NULLS LAST, position NULLS
-- FIRST) so that the index serves it.
--
-- The predicate is true of every row (the column is NOT NULL); it is there
-- for the planner: the index can serve only a query that constrains its
-- leading column, never a lookup by id alone, which it covers (an index-only
-- scan of all of it, with a filter, looked cheapest to a plan made while the
-- queue looked empty: test/python/test_plan_shapes.py).
CREATE INDEX message_channel_ix
ON @extschema@.message (channel_id, position NULLS FIRST, dequeue_at, id)
WHERE channel_id IS NOT NULL;
