-- The channels a routing key reaches (a dry run of message_publish), in
-- name order: those bound by a pattern equal to the key (one probe of
-- topic_binding_pkey) and those bound by a wildcard pattern whose regex
-- matches it, tested only for the wildcard patterns of the key's first
-- word and those that start with a wildcard (topic_binding_wildcard_ix),
-- each channel once.
CREATE FUNCTION @extschema@.topic_routes(p_routing_key text)
RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@._check_topic(p_routing_key, 'p_routing_key');
    RETURN QUERY
    SELECT b.channel
    FROM @extschema@.topic_binding AS b
    WHERE b.pattern = p_routing_key AND b.regex IS NULL
    UNION
    SELECT w.channel
    FROM @extschema@.topic_binding AS w
    WHERE w.regex IS NOT NULL AND w.head = pg_catalog.split_part(p_routing_key, '.', 1) AND p_routing_key ~ w.regex
    UNION
    SELECT v.channel
    FROM @extschema@.topic_binding AS v
    WHERE v.regex IS NOT NULL AND v.head IS NULL AND p_routing_key ~ v.regex
    ORDER BY 1;
END;
$$;

COMMENT ON FUNCTION @extschema@.topic_routes(text) IS
'The channels message_publish would create a message in for this routing key (its bindings), in name order.';

REVOKE ALL ON FUNCTION @extschema@.topic_routes(text) FROM PUBLIC;
