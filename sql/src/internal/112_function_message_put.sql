-- Internal: put a new message in its channel: message_create, each redriven
-- dead letter, each periodic message (message_create_batch does the same
-- set-based).  Its state follows from its time and its channel:
--   scheduled  p_dequeue_at is ahead of p_now: message_due_ix promotes it;
--   waiting    its channel has a limit or is paused: due at once in
--              message_due_ix, so that the next dequeue admits it (a
--              producer never locks a limited channel's row: producers
--              would wait for each other, and deadlock across channels);
--   ready      otherwise: its channel's next place (_message_place).
-- Then a notification, for a channel with notify whose message is
-- deliverable now (its name, or the payload it chose).
-- The caller has entered the epoch (p_bound) and read its clock after.
-- Parameters: p_channel, the channel's configuration (_channel_config);
--   p_id and the message's columns; p_bound; p_now; p_margin, how far before
--   its channel's last ready message it must sort to be early
--   (_message_place): a second for a default dequeue_at, 0 for a given one.
-- Calls: _message_place, _channel_admit.
-- Tables: message (insert).
CREATE FUNCTION @extschema@._message_put(
    p_channel @extschema@.channel,
    p_id bigint,
    p_dequeue_at bigint,
    p_created_at bigint,
    p_content bytea,
    p_state bytea,
    p_key text,
    p_attempt_log jsonb,
    p_bound bigint,
    p_now bigint,
    p_margin bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_position bigint;
    v_is_early boolean := FALSE;
    v_limited boolean := p_channel.max_concurrency IS NOT NULL OR p_channel.release_interval_ms > 0
        OR p_channel.is_paused;
BEGIN
    IF p_dequeue_at <= p_now AND NOT v_limited THEN
        SELECT p.place, p.is_early INTO v_position, v_is_early
        FROM @extschema@._message_place(p_channel.id, p_bound, p_dequeue_at, p_margin) AS p;
    END IF;
    INSERT INTO @extschema@.message (
        id, channel_id, channel, dequeue_at, created_at, content, state, key, attempt_log,
        position, is_early, is_held
    )
    VALUES (
        p_id, p_channel.id, p_channel.name, p_dequeue_at, p_created_at, p_content, p_state, p_key, p_attempt_log,
        v_position, v_is_early, FALSE
    );
    IF p_channel.notify AND p_dequeue_at <= p_now AND NOT p_channel.is_paused THEN
        PERFORM pg_catalog.pg_notify('lonnymq', COALESCE(p_channel.notify_payload, p_channel.name));
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_put(
    @extschema@.channel, bigint, bigint, bigint, bytea, bytea, text, jsonb, bigint, bigint, bigint
) IS
'Internal: insert a new message in its channel, ready (placed), scheduled or held for admission, and notify.';

REVOKE ALL ON FUNCTION @extschema@._message_put(
    @extschema@.channel, bigint, bigint, bigint, bytea, bytea, text, jsonb, bigint, bigint, bigint
) FROM PUBLIC;
