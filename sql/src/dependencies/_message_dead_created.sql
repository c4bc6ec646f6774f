-- Internal: messages created waiting for a parent that is a dead letter
-- (p_after_mode 'completed', doc/dependencies.md) go to the dead letters at
-- once, as they would have gone had it died while they waited: each is
-- counted created and dead-lettered, its last error names the parent, its
-- parents and mode are kept for a redrive (dead_letter.after), and its key,
-- claimed by the create, lasts the channel's dedup window, as a dead
-- letter's does.  It takes no room in a max_size channel.
-- Parameters: p_ids, the ids the create took; p_channel_id, p_channel, the
--   channel; p_contents, p_keys, p_headers, each message's (p_keys,
--   p_headers: NULL elements allowed); p_now, the create's clock;
--   p_dead_parent, the dead letter named; p_after, p_after_mode, as given.
-- Returns: nothing.
-- Calls: _channel_config, _message_key_release, _attempt_log_append.
-- Tables: writes dead_letter (inserts), messages_created_seq,
--   messages_dead_lettered_seq (nextval) (message_key through
--   _message_key_release, channel through _channel_config).
-- Locks: the claims it updates.
CREATE FUNCTION @extschema@._message_dead_created(
    p_ids bigint[],
    p_channel_id bigint,
    p_channel text,
    p_contents bytea[],
    p_keys text[],
    p_headers jsonb[],
    p_now bigint,
    p_dead_parent bigint,
    p_after bigint[],
    p_after_mode text
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_error text := pg_catalog.format('lonnymq: parent %s is a dead letter', p_dead_parent);
    v_window_ms bigint;
    v_key record;
BEGIN
    INSERT INTO @extschema@.dead_letter (
        id, channel, key, content, num_attempts, created_at, dead_at, last_error, attempt_log, headers, after, after_mode
    )
    SELECT
        d.id, p_channel, d.key, d.content, 0, p_now, p_now, v_error,
        @extschema@._attempt_log_append(NULL, 0, p_now, v_error), d.headers,
        ARRAY(SELECT DISTINCT a.id FROM pg_catalog.unnest(p_after) AS a (id) ORDER BY a.id),
        COALESCE(p_after_mode, 'completed')
    FROM ROWS FROM (
        pg_catalog.unnest(p_ids), pg_catalog.unnest(p_contents), pg_catalog.unnest(p_keys), pg_catalog.unnest(p_headers)
    ) AS d (id, content, key, headers)
    WHERE d.id IS NOT NULL
    ORDER BY d.id;
    -- (Counted, lonnymq_messages_created_total and
    -- lonnymq_messages_dead_lettered_total: sequences, no rows.)
    PERFORM
        pg_catalog.nextval('@extschema@.messages_created_seq'),
        pg_catalog.nextval('@extschema@.messages_dead_lettered_seq')
    FROM pg_catalog.unnest(p_ids) AS d (id)
    WHERE d.id IS NOT NULL;
    FOR v_key IN
        SELECT d.id, d.key
        FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_keys)) AS d (id, key)
        WHERE d.id IS NOT NULL AND d.key IS NOT NULL
    LOOP
        v_window_ms := COALESCE(v_window_ms, (@extschema@._channel_config(p_channel_id, p_channel)).dedup_window_ms);
        PERFORM @extschema@._message_key_release(p_channel_id, v_key.key, v_key.id, v_window_ms, p_now);
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_dead_created(
    bigint[], bigint, text, bytea[], text[], jsonb[], bigint, bigint, bigint[], text
) IS
'Internal: messages created waiting for a dead letter go to the dead letters at once.';

REVOKE ALL ON FUNCTION @extschema@._message_dead_created(
    bigint[], bigint, text, bytea[], text[], jsonb[], bigint, bigint, bigint[], text
) FROM PUBLIC;
