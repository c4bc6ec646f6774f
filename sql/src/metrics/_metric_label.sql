-- Internal: a label value escaped for Prometheus' text format (backslash,
-- double quote and newline, in that order).
-- Parameters: p_value, the label's value.
-- Returns: the escaped value (NULL for NULL).
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._metric_label(p_value text)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT pg_catalog.replace(
        pg_catalog.replace(pg_catalog.replace(p_value, E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n'
    )
$$;

COMMENT ON FUNCTION @extschema@._metric_label(text) IS
'Internal: a label value escaped for Prometheus'' text exposition format.';

REVOKE ALL ON FUNCTION @extschema@._metric_label(text) FROM PUBLIC;
