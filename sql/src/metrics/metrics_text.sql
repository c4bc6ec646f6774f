-- The metrics of lonnymq.metrics in Prometheus' text exposition format
-- (version 0.0.4): for each metric, a HELP and a TYPE line, then one line per
-- series, labels escaped (backslash, double quote, newline).  Serve it from
-- any HTTP endpoint, or scrape the view with postgres_exporter or sql_exporter
-- (monitoring/).  Cost: the view's (doc/metrics.md).
-- Parameters: none.
-- Returns: the exposition text, ending in a newline.
-- Calls: _metric_families, _metric_label, _metrics.
-- Tables: none (message, dead_letter, channel and the counters' sequences
--   through _metrics)
-- Locks: none.
CREATE FUNCTION @extschema@.metrics_text()
RETURNS text
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT COALESCE(pg_catalog.string_agg(l.line, E'\n' ORDER BY l.family, l.i), '') || E'\n'
    FROM (
        SELECT
            f.i AS family, 0 AS i,
            '# HELP ' || f.metric || ' ' || f.help || E'\n# TYPE ' || f.metric || ' ' || f.type AS line
        FROM @extschema@._metric_families() AS f
        UNION ALL
        SELECT
            f.i,
            pg_catalog.row_number() OVER (PARTITION BY f.i ORDER BY m.channel, m.state),
            m.metric
            || CASE
                WHEN m.channel IS NULL AND m.state IS NULL THEN ''
                ELSE '{' || pg_catalog.concat_ws(
                    ',',
                    'channel="' || @extschema@._metric_label(m.channel) || '"',
                    'state="' || @extschema@._metric_label(m.state) || '"'
                ) || '}'
            END
            || ' ' || m.value::text
        FROM @extschema@._metrics() AS m
        INNER JOIN @extschema@._metric_families() AS f ON f.metric = m.metric
    ) AS l
$$;

COMMENT ON FUNCTION @extschema@.metrics_text() IS
'The metrics of the view metrics in Prometheus'' text exposition format: HELP and TYPE lines, one line per series.';

REVOKE ALL ON FUNCTION @extschema@.metrics_text() FROM PUBLIC;
