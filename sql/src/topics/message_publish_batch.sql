-- Publish many messages to one topic: message_create_batch in every channel
-- that topic_routes(p_routing_key) lists, in the caller's transaction,
-- channels in name order (as message_publish, for the locks
-- message_create_batch holds until commit); the arrays as message_create_batch
-- takes them (keys deduplicate per channel).  Returns the number of messages
-- stored over all channels (created, or found by their keys; what a channel's
-- max_size refuses is not counted).  No channel bound: 0, or, with
-- p_require_route, an error (P0002) that changes nothing.  Cost:
-- _topic_routes's probes (inlined), then one message_create_batch per channel.
-- Parameters: p_routing_key, the routing key; p_contents, p_dequeue_at,
--   p_keys, as message_create_batch takes them; p_require_route, raise P0002
--   when no channel is bound; p_headers, p_after, p_after_mode, as
--   message_create_batch takes them.
-- Returns: how many messages were stored over all channels.
-- Calls: _check_topic, _check_batch, _check_after, _topic_routes (inlined),
--   message_create_batch.
-- Tables: none (topic_binding through _topic_routes; message and the rest
--   through message_create_batch)
-- Locks: none of its own; message_create_batch's, channel by channel in name
--   order, until the transaction ends.
CREATE FUNCTION @extschema@.message_publish_batch(
    p_routing_key text,
    p_contents bytea[],
    p_dequeue_at bigint[] DEFAULT NULL,
    p_keys text[] DEFAULT NULL,
    p_require_route boolean DEFAULT FALSE,
    p_headers jsonb[] DEFAULT NULL,
    p_after bigint[] DEFAULT NULL,
    p_after_mode text DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channels integer;
    v_stored bigint;
BEGIN
    -- (Checked here too: a key bound to no channel creates nothing, and
    -- bad input must still be refused.)
    PERFORM @extschema@._check_topic(p_routing_key, 'p_routing_key');
    PERFORM @extschema@._check_batch(p_contents, p_dequeue_at, p_keys, p_headers);
    PERFORM @extschema@._check_after(p_after, p_after_mode);
    SELECT pg_catalog.count(DISTINCT r.channel), pg_catalog.count(i.id)
    INTO v_channels, v_stored
    FROM (SELECT t.channel FROM @extschema@._topic_routes(p_routing_key) AS t ORDER BY t.channel) AS r
    LEFT JOIN LATERAL @extschema@.message_create_batch(
        r.channel, p_contents, p_dequeue_at, p_keys, p_headers, p_after, p_after_mode
    ) AS i (id) ON TRUE;
    IF v_channels = 0 AND p_require_route THEN
        RAISE EXCEPTION 'lonnymq: no channel is bound to routing key "%"', p_routing_key
            USING ERRCODE = 'P0002';
    END IF;
    RETURN v_stored;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_publish_batch(text, bytea[], bigint[], text[], boolean, jsonb[], bigint[], text) IS
'Create the messages in every channel bound to a pattern matching p_routing_key (topic_bind), in the caller''s transaction. Returns how many messages were stored over all channels; none bound: 0, or P0002 with p_require_route.';

REVOKE ALL ON FUNCTION @extschema@.message_publish_batch(
    text, bytea[], bigint[], text[], boolean, jsonb[], bigint[], text
) FROM PUBLIC;
