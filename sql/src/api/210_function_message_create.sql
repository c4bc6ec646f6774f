-- Create a message.  Inside the caller's transaction: the message exists if
-- and only if that transaction commits.  In a channel without limits it
-- reads the channel's configuration (one probe, which finds no row for a
-- channel without one) and its places, and writes one message row, ready
-- at its channel's next place in the round order (_message_put): no channel
-- row is written or locked, so producers neither block each other nor
-- consumers.  A channel with max_concurrency, release_interval_ms or a
-- pause admits it (_channel_admit: its producers wait for each other's
-- admissions); one with max_size counts it (channel_quota).
--
-- p_key (optional) deduplicates: while a message with that key exists in the
-- channel, or was completed or dead-lettered there less than the channel's
-- dedup_window_ms ago, the existing message's id is returned and nothing is
-- stored (see _message_key_claim).  The key is checked before max_size: a
-- duplicate of a stored message is never reported as dropped.
-- With the channel's notify on, a message deliverable now sends
-- NOTIFY lonnymq with the channel name as payload (PostgreSQL delivers one
-- per transaction and payload).
CREATE FUNCTION @extschema@.message_create(
    p_channel text,
    p_content bytea,
    p_dequeue_at bigint DEFAULT NULL,
    p_key text DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bound bigint;
    v_now bigint;
    v_dequeue_at bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_id bigint;
    v_existing bigint;
BEGIN
    IF p_channel IS NULL OR pg_catalog.length(p_channel) NOT BETWEEN 1 AND 255 THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    IF p_content IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_content must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.octet_length(p_content) > @extschema@._max_content_bytes() THEN
        PERFORM @extschema@._check_size('p_content', pg_catalog.octet_length(p_content), @extschema@._max_content_bytes());
    END IF;
    IF pg_catalog.length(p_key) NOT BETWEEN 1 AND 1024 THEN
        PERFORM @extschema@._check_key(p_key);
    END IF;

    PERFORM @extschema@._channel_guard_shared(p_channel);
    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    -- The default is the transaction's start, so that messages created in one
    -- transaction share a dequeue_at and keep their order by id.
    v_dequeue_at := COALESCE(p_dequeue_at, @extschema@.to_epoch(pg_catalog.now()));
    v_channel := @extschema@._channel_config(@extschema@._channel_id(p_channel), p_channel);
    v_id := pg_catalog.nextval('@extschema@.message_id_seq');
    IF p_key IS NOT NULL THEN
        v_existing := @extschema@._message_key_claim(v_channel.id, p_key, v_id, v_now);
        IF v_existing IS NOT NULL THEN
            RETURN v_existing;
        END IF;
    END IF;

    IF v_channel.max_size IS NOT NULL
        AND @extschema@._channel_quota_take(v_channel.id, v_channel.max_size, 1) = 0 THEN
        IF p_key IS NOT NULL THEN
            PERFORM @extschema@._message_key_release(v_channel.id, p_key, v_id, 0, 0);
        END IF;
        RETURN NULL;
    END IF;

    PERFORM @extschema@._message_put(
        v_channel, v_id, v_dequeue_at, v_now, p_content, NULL, p_key, NULL, v_bound, v_now,
        CASE WHEN p_dequeue_at IS NULL THEN 1000 ELSE 0 END
    );
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_create(text, bytea, bigint, text) IS
'Create a message in a channel (a channel needs no creation). p_dequeue_at: epoch ms before which it is not delivered; past or negative values give priority within the channel. p_key: a deduplication key (the existing message''s id is returned while the key is held). Returns the id, or NULL when the channel is at max_size (nothing stored).';

REVOKE ALL ON FUNCTION @extschema@.message_create(text, bytea, bigint, text) FROM PUBLIC;
