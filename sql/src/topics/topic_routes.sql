-- The channels a routing key reaches (a dry run of message_publish), in name
-- order, each once (_topic_routes: its probes).
-- Parameters: p_routing_key, the routing key.
-- Returns: the channels' names, in name order.
-- Calls: _check_topic, _topic_routes (inlined).
-- Tables: none (topic_binding through _topic_routes)
-- Locks: none.
CREATE FUNCTION @extschema@.topic_routes(p_routing_key text)
RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@._check_topic(p_routing_key, 'p_routing_key');
    RETURN QUERY
    SELECT r.channel FROM @extschema@._topic_routes(p_routing_key) AS r ORDER BY r.channel;
END;
$$;

COMMENT ON FUNCTION @extschema@.topic_routes(text) IS
'The channels message_publish would create a message in for this routing key (its bindings), in name order.';

REVOKE ALL ON FUNCTION @extschema@.topic_routes(text) FROM PUBLIC;
