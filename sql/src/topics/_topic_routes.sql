-- Internal: the channels a routing key reaches, each once (topic_routes
-- without its check and order): the bindings whose pattern equals the key (one
-- probe of topic_binding_pkey), and the wildcard bindings of the key's first
-- word and those that start with a wildcard whose regex matches it (two ranges
-- of topic_binding_wildcard_ix).  SQL, STABLE and a table function: inlined
-- into its callers' statements (message_publish's, which creates the copies,
-- message_publish_batch's and topic_routes'), with no call of its own.
-- Parameters: p_routing_key, the routing key (checked by the caller,
--   _check_topic).
-- Returns: the channels' names, each once, in no order.
-- Calls: none.
-- Tables: reads topic_binding (topic_binding_pkey: the exact patterns;
--   topic_binding_wildcard_ix: the key's first word, and the patterns that
--   start with a wildcard).
-- Locks: none.
CREATE FUNCTION @extschema@._topic_routes(p_routing_key text)
RETURNS TABLE (channel text)
LANGUAGE sql STABLE
AS $$
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
$$;

COMMENT ON FUNCTION @extschema@._topic_routes(text) IS
'Internal: the channels bound to a pattern that matches the routing key, each once, in no order.';

REVOKE ALL ON FUNCTION @extschema@._topic_routes(text) FROM PUBLIC;
