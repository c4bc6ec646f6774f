-- Bind a topic pattern to a channel: from the commit on, message_publish with
-- a routing key the pattern matches creates its message in the channel too.
-- Returns false when the binding existed already.  The channel need not exist
-- (binding does not create or configure it).  The row carries what
-- _topic_routes probes by: the pattern's regex (_topic_regex, NULL without
-- wildcards) and its head, the first word of a wildcard pattern (NULL when
-- that word is itself a wildcard).
-- Parameters: p_pattern, the topic pattern (dot-separated words; '*' one word,
--   '#' zero or more); p_channel, the channel (a name, not a channel pattern).
-- Returns: whether the binding was made (false: it existed).
-- Calls: _check_topic, _check_message_channel, _topic_regex, _clock_ms.
-- Tables: writes topic_binding (inserts; a binding that exists, by
--   topic_binding_pkey, is left as it is).
-- Locks: the row it inserts (a concurrent bind of the same pair waits for this
--   transaction).
CREATE FUNCTION @extschema@.topic_bind(p_pattern text, p_channel text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@._check_topic(p_pattern, 'p_pattern');
    PERFORM @extschema@._check_message_channel(p_channel);
    INSERT INTO @extschema@.topic_binding (pattern, channel, regex, head, created_at)
    SELECT
        p_pattern, p_channel, w.regex,
        CASE WHEN w.regex IS NOT NULL AND w.head NOT IN ('*', '#') THEN w.head END,
        @extschema@._clock_ms()
    FROM (SELECT @extschema@._topic_regex(p_pattern) AS regex, pg_catalog.split_part(p_pattern, '.', 1) AS head) AS w
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION @extschema@.topic_bind(text, text) IS
'Bind a topic pattern (dot-separated words; * one word, # zero or more) to a channel: message_publish with a matching routing key creates its message there. Returns false when already bound.';

REVOKE ALL ON FUNCTION @extschema@.topic_bind(text, text) FROM PUBLIC;
