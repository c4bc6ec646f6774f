-- Internal: the metric families of lonnymq.metrics, in the order
-- metrics_text() writes them, with their Prometheus type and help text
-- (monitoring/ repeats them; test/python/test_metrics.py compares).
-- Parameters: none.
-- Returns: one row per family: i, its place in the output; metric; type
--   (gauge, counter); help.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._metric_families()
RETURNS TABLE (i integer, metric text, type text, help text)
LANGUAGE sql IMMUTABLE
AS $$
    SELECT f.i, f.metric, f.type, f.help
    FROM (
        VALUES
        (
            1, 'lonnymq_messages', 'gauge',
            'Messages by state (ready, scheduled, locked, waiting) per configured channel, pattern, '
            || 'and * (every other channel); counted up to lonnymq_messages_count_limit per series.'
        ),
        (
            2, 'lonnymq_dead_letters', 'gauge',
            'Dead letters per configured channel, pattern, and * (every other channel); '
            || 'counted up to lonnymq_messages_count_limit per series.'
        ),
        (
            3, 'lonnymq_oldest_ready_age_seconds', 'gauge',
            'How long the longest-waiting next ready message of the series'' channels has been deliverable.'
        ),
        (
            4, 'lonnymq_messages_count_limit', 'gauge',
            'The entries a series'' counts read at most (the setting lonnymq.metrics_count_limit).'
        ),
        (5, 'lonnymq_messages_created_total', 'counter', 'Messages stored by a create, a publish, a periodic message or a redrive.'),
        (6, 'lonnymq_messages_delivered_total', 'counter', 'Messages locked for a worker by a dequeue.'),
        (7, 'lonnymq_messages_completed_total', 'counter', 'Messages completed.'),
        (8, 'lonnymq_messages_failed_total', 'counter', 'Deliveries failed by message_fail.'),
        (9, 'lonnymq_messages_dead_lettered_total', 'counter', 'Messages moved to the dead letters.'),
        (10, 'lonnymq_messages_lock_expired_total', 'counter', 'Locks that expired before their delivery was settled.')
    ) AS f (i, metric, type, help)
$$;

COMMENT ON FUNCTION @extschema@._metric_families() IS
'Internal: the metric families of the view metrics, with their Prometheus type and help text.';

REVOKE ALL ON FUNCTION @extschema@._metric_families() FROM PUBLIC;
