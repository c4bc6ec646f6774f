-- Publish a message to a topic: message_create in every channel that
-- topic_routes(p_routing_key) lists, in the caller's transaction (all the
-- copies commit or none), each a message of its own with its channel's limits,
-- retries and dead letters.  p_key deduplicates per channel (a channel holding
-- the key returns its message, as message_create does).  Channels in name
-- order, so that two publishers take the locks message_create holds until
-- commit (a max_size channel's quota row, a key's claim) in one order.
-- Returns the number of channels that hold the message after the call
-- (created, or found by its key); a channel at its max_size stores nothing and
-- is not counted.  No channel bound: 0, or, with p_require_route, an error
-- (P0002) that changes nothing.  Cost: _topic_routes's probes (inlined), then
-- one message_create per channel.
-- Parameters: p_routing_key, the routing key; p_content, p_dequeue_at, p_key,
--   as message_create takes them; p_require_route, raise P0002 when no channel
--   is bound; p_headers, as message_create takes them (every copy carries
--   them: a trace's context reaches every subscriber); p_after,
--   p_after_mode, as message_create takes them (every copy waits for the
--   same parents).
-- Returns: how many channels hold the message.
-- Calls: _check_topic, _check_message, _check_headers, _check_after,
--   _topic_routes (inlined), message_create.
-- Tables: none (topic_binding through _topic_routes; message and the rest
--   through message_create)
-- Locks: none of its own; message_create's, channel by channel in name order
--   (the epoch's parity and each channel guard shared, a max_size channel's
--   quota row FOR UPDATE, key claims), until the transaction ends.
CREATE FUNCTION @extschema@.message_publish(
    p_routing_key text,
    p_content bytea,
    p_dequeue_at bigint DEFAULT NULL,
    p_key text DEFAULT NULL,
    p_require_route boolean DEFAULT FALSE,
    p_headers jsonb DEFAULT NULL,
    p_after bigint[] DEFAULT NULL,
    p_after_mode text DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channels integer;
    v_stored integer;
BEGIN
    -- (Checked here too: a key bound to no channel creates nothing, and
    -- bad input must still be refused.)
    PERFORM @extschema@._check_topic(p_routing_key, 'p_routing_key');
    PERFORM @extschema@._check_message(p_content, p_key);
    PERFORM @extschema@._check_headers(p_headers, 'p_headers');
    PERFORM @extschema@._check_after(p_after, p_after_mode);
    SELECT
        pg_catalog.count(*),
        pg_catalog.count(@extschema@.message_create(r.channel, p_content, p_dequeue_at, p_key, p_headers, p_after, p_after_mode))
    INTO v_channels, v_stored
    FROM (SELECT t.channel FROM @extschema@._topic_routes(p_routing_key) AS t ORDER BY t.channel) AS r;
    IF v_channels = 0 AND p_require_route THEN
        RAISE EXCEPTION 'lonnymq: no channel is bound to routing key "%"', p_routing_key
            USING ERRCODE = 'P0002';
    END IF;
    RETURN v_stored;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_publish(text, bytea, bigint, text, boolean, jsonb, bigint[], text) IS
'Create the message in every channel bound to a pattern matching p_routing_key (topic_bind), in the caller''s transaction. Returns how many channels hold it; none bound: 0, or P0002 with p_require_route.';

REVOKE ALL ON FUNCTION @extschema@.message_publish(
    text, bytea, bigint, text, boolean, jsonb, bigint[], text
) FROM PUBLIC;
