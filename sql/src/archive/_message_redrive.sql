-- Internal: put one dead letter back into its channel (dead_letter_redrive),
-- deliverable now, with its id, its count of attempts (fencing), content,
-- state, headers, key, created_at and attempt log; failures start again
-- at 0.
--   * Its release row, if its dead end had not resolved all its dependents
--     yet, goes first: those left wait for it again (it keeps
--     has_dependents).
--   * A message that died waiting (p_dead.after): its parents are
--     classified again, as a create's (_message_after): with one still a
--     dead letter (and 'completed'), it stays dead, its last error naming
--     it; those in the queue are waited for again (_message_edges_link);
--     those gone count as done.
--   * Its key is claimed again unless another message holds it now (it
--     then has no key).  max_size is not applied (nothing is dropped) but
--     it counts towards it.  A channel needs no creation: the dead letters
--     of a dropped channel go back to it too.
--   * It is ready at its channel's next place or, in a channel that admits
--     (limits, a pause), due at once in message_due_ix for admission, as a
--     create's; with the channel's notify on and not paused, NOTIFY
--     lonnymq.  A waiting one is out of reach until its last parent ends.
-- Parameters: p_dead, the dead letter (locked by the caller); p_channel, its
--   channel's configuration (_channel_config); p_bound, the epoch's bound
--   (the caller entered the epoch); p_now, the caller's clock.
-- Returns: whether it was put back (false: a parent is still a dead letter).
-- Calls: _message_after, _message_edges_link, _waiting_dequeue_at,
--   _channel_promotes, _channel_claims, _message_place (inlined).
-- Tables: writes dead_letter (deletes it, or its error when it stays dead),
--   message (inserts it; deletes its release row), message_key (the claim
--   taken again), channel_quota (num_created of a max_size channel),
--   messages_created_seq (nextval).  (message's round order through
--   _message_place; edges through _message_edges_link.)
-- Locks: its release row, deleted; _message_after's (its parents FOR KEY
--   SHARE); the claim row it updates or inserts (an INSERT waits for a
--   concurrent producer's uncommitted claim of the key); a max_size
--   channel's channel_quota row, updated (the channel's producers wait for
--   this transaction).
CREATE FUNCTION @extschema@._message_redrive(
    p_dead @extschema@.dead_letter,
    p_channel @extschema@.channel,
    p_bound bigint,
    p_now bigint
)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_key text := p_dead.key;
    v_limited boolean := @extschema@._channel_promotes(p_channel);
    v_after bigint[];
    v_dead_parent bigint;
    v_has_dependents boolean;
    v_counted bigint;
BEGIN
    IF p_dead.after IS NOT NULL THEN
        SELECT a.parents, a.dead_parent INTO v_after, v_dead_parent
        FROM @extschema@._message_after(p_dead.after, p_dead.after_mode) AS a;
        IF v_dead_parent IS NOT NULL THEN
            UPDATE @extschema@.dead_letter AS d
            SET last_error = pg_catalog.format('lonnymq: parent %s is a dead letter', v_dead_parent)
            WHERE d.id = p_dead.id;
            RETURN FALSE;
        END IF;
    END IF;
    -- Its dead end's release row, if any dependents were left: they wait
    -- for it again.
    DELETE FROM @extschema@.message AS m
    WHERE m.id = p_dead.id AND m.schedule = '';
    v_has_dependents := FOUND;
    IF v_key IS NOT NULL THEN
        UPDATE @extschema@.message_key AS k
        SET message_id = p_dead.id, expires_at = NULL
        WHERE
            k.channel_id = p_channel.id
            AND k.key = v_key
            AND (k.message_id = p_dead.id OR k.expires_at <= p_now);
        IF NOT FOUND THEN
            INSERT INTO @extschema@.message_key (channel_id, key, message_id)
            VALUES (p_channel.id, v_key, p_dead.id)
            ON CONFLICT (channel_id, key) DO NOTHING;
            IF NOT FOUND THEN
                v_key := NULL;
            END IF;
        END IF;
    END IF;
    -- Counted towards max_size, which it may exceed: a redrive never
    -- drops a message.
    UPDATE @extschema@.channel_quota AS q
    SET num_created = q.num_created + 1
    WHERE q.channel_id = p_channel.id;
    IF v_after IS NOT NULL THEN
        PERFORM @extschema@._message_edges_link(ARRAY[p_dead.id], v_after, p_dead.after_mode);
    END IF;
    -- Deliverable now: ready at its channel's next place, or, in a channel
    -- with limits (or with parents to wait for), due at once for admission
    -- (as a create); waiting, out of reach.
    INSERT INTO @extschema@.message (
        id, channel_id, channel, dequeue_at, created_at, content, state, key, attempt_log, position, is_early,
        is_limited, headers, num_attempts, has_dependents
    )
    SELECT
        p_dead.id, p_channel.id, p_channel.name,
        CASE WHEN v_after IS NOT NULL THEN @extschema@._waiting_dequeue_at(p_now) ELSE p_now END, p_dead.created_at,
        p_dead.content, p_dead.state, v_key, p_dead.attempt_log,
        CASE WHEN NOT v_limited AND p_dead.after IS NULL THEN p.place END,
        NOT v_limited AND p_dead.after IS NULL AND p.is_early,
        @extschema@._channel_claims(p_channel), p_dead.headers, p_dead.num_attempts, v_has_dependents
    FROM @extschema@._message_place(p_channel.id, p_bound, p_now, 0) AS p;
    IF p_channel.notify AND NOT p_channel.is_paused AND v_after IS NULL THEN
        PERFORM pg_catalog.pg_notify('lonnymq', COALESCE(p_channel.notify_payload, p_channel.name));
    END IF;
    DELETE FROM @extschema@.dead_letter AS d WHERE d.id = p_dead.id;
    -- (Counted, lonnymq_messages_created_total: a sequence, no row.)
    v_counted := pg_catalog.nextval('@extschema@.messages_created_seq');
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_redrive(@extschema@.dead_letter, @extschema@.channel, bigint, bigint) IS
'Internal: put one dead letter back with its id and attempt count (waiting again for its parents still in the queue); false when a parent is still a dead letter.';

REVOKE ALL ON FUNCTION @extschema@._message_redrive(
    @extschema@.dead_letter, @extschema@.channel, bigint, bigint
) FROM PUBLIC;
