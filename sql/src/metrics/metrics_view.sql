-- The metrics for Prometheus, one row per metric and label set: text
-- columns are labels, value the value (lonnymq._metrics says what each
-- counts and what it reads; metrics_text() writes them in Prometheus'
-- format).  A filter on the view does not make it cheaper: each scrape
-- reads a bounded amount per channel.
CREATE VIEW @extschema@.metrics AS
SELECT
    m.metric,
    m.channel,
    m.state,
    m.value
FROM @extschema@._metrics() AS m;

COMMENT ON VIEW @extschema@.metrics IS
'Metrics for Prometheus, one row per metric and label set (metric, channel, state; value): gauges per configured channel, pattern and * (the other channels), and counters. metrics_text() renders them.';

COMMENT ON COLUMN @extschema@.metrics.metric IS
'The metric''s name, with the lonnymq_ prefix; counters end in _total.';

COMMENT ON COLUMN @extschema@.metrics.channel IS
'Label: a configured channel, a pattern (its name, ending in *), or * (every other channel); NULL for the totals.';

COMMENT ON COLUMN @extschema@.metrics.state IS
'Label of lonnymq_messages: ready, scheduled or locked; NULL for the other metrics.';

COMMENT ON COLUMN @extschema@.metrics.value IS
'The value: a count, a number of seconds, or a counter''s total.';
