-- Remove a binding made by topic_bind.  Returns false when there was none.
-- Messages already published stay in their channels.
-- Parameters: p_pattern, the topic pattern; p_channel, the channel.
-- Returns: whether a binding was removed.
-- Calls: _check_topic, _check_message_channel.
-- Tables: writes topic_binding (deletes, by topic_binding_pkey).
-- Locks: the row it deletes.
CREATE FUNCTION @extschema@.topic_unbind(p_pattern text, p_channel text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@._check_topic(p_pattern, 'p_pattern');
    PERFORM @extschema@._check_message_channel(p_channel);
    DELETE FROM @extschema@.topic_binding AS b
    WHERE b.pattern = p_pattern AND b.channel = p_channel;
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION @extschema@.topic_unbind(text, text) IS
'Remove a topic binding. Returns false when there was none; messages already published stay.';

REVOKE ALL ON FUNCTION @extschema@.topic_unbind(text, text) FROM PUBLIC;
