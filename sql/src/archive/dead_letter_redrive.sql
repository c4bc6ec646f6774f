-- Put dead letters back into their channels as new messages, deliverable now:
-- those of p_channel, or those with an id in p_ids, or both filters, or every
-- dead letter when both are NULL.  Returns how many were put back, each
-- counted in lonnymq_messages_created_total.  A redriven message gets a new id
-- (old fencing tokens can never match it) and starts again at num_attempts 0
-- with its content, state, headers, key, created_at and attempt log.  Its key is
-- claimed again unless another message holds it now (the redriven message then
-- has no key).  max_size is not applied (nothing is dropped) but the messages
-- count towards it.  A channel needs no creation: the dead letters of a
-- dropped channel go back to it too, with its pattern's configuration or the
-- defaults.  Each message is ready at its channel's next place or, in a
-- channel that admits (limits, a pause), due at once in message_due_ix for
-- admission, as message_create's; with the channel's notify on and not paused,
-- NOTIFY lonnymq.  Dead letters locked by a concurrent redrive or delete are
-- skipped.
-- Parameters: p_channel, only this channel's dead letters (NULL: any channel);
--   p_ids, only these ids (NULL: any).
-- Returns: how many were put back.
-- Calls: _check_channel_name, _epoch_enter, _clock_ms, _channel_guard_shared,
--   _channel_id, _channel_config, _channel_promotes (inlined), _channel_claims, _message_place
--   (inlined).
-- Tables: reads dead_letter (dead_letter_pkey for p_ids, else
--   dead_letter_channel_ix, in order); writes dead_letter (deletes each one
--   put back), message (inserts), message_key (the claim taken again),
--   channel_quota (num_created of a max_size channel), message_id_seq,
--   messages_created_seq.  (channel through _channel_config; message's round
--   order through _message_place.)
-- Locks: the epoch's parity (1819111690) shared until the transaction ends
--   (_epoch_enter); the dead letters FOR UPDATE SKIP LOCKED, each deleted once
--   put back; per channel, the channel guard (1819111681, or its bucket guard
--   1819111682) shared until the transaction ends (_channel_guard_shared); the
--   claim rows it updates or inserts (an INSERT waits for a concurrent
--   producer's uncommitted claim of the key); a max_size channel's
--   channel_quota row, updated (the channel's producers wait for this
--   transaction).
CREATE FUNCTION @extschema@.dead_letter_redrive(
    p_channel text DEFAULT NULL,
    p_ids bigint[] DEFAULT NULL
)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now bigint;
    v_dead record;
    v_channel @extschema@.channel%ROWTYPE;
    v_id bigint;
    v_key text;
    v_count integer := 0;
    v_bound bigint;
    v_cursor refcursor;
    v_limited boolean;
BEGIN
    IF p_channel IS NOT NULL THEN
        PERFORM @extschema@._check_channel_name(p_channel);
    END IF;
    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    -- One query per way of choosing, each walking its own index in order:
    -- the ids (primary key), one channel or all (dead_letter_channel_ix).
    IF p_ids IS NOT NULL THEN
        OPEN v_cursor FOR
        SELECT d.*
        FROM @extschema@.dead_letter AS d
        WHERE d.id = ANY(p_ids) AND (p_channel IS NULL OR d.channel = p_channel)
        ORDER BY d.id
        FOR UPDATE SKIP LOCKED;
    ELSIF p_channel IS NOT NULL THEN
        OPEN v_cursor FOR
        SELECT d.*
        FROM @extschema@.dead_letter AS d
        WHERE d.channel = p_channel
        ORDER BY d.channel, d.id
        FOR UPDATE SKIP LOCKED;
    ELSE
        OPEN v_cursor FOR
        SELECT d.*
        FROM @extschema@.dead_letter AS d
        ORDER BY d.channel, d.id
        FOR UPDATE SKIP LOCKED;
    END IF;
    LOOP
        FETCH v_cursor INTO v_dead;
        EXIT WHEN NOT FOUND;
        IF v_channel.name IS DISTINCT FROM v_dead.channel THEN
            PERFORM @extschema@._channel_guard_shared(v_dead.channel);
            v_channel := @extschema@._channel_config(@extschema@._channel_id(v_dead.channel), v_dead.channel);
            v_limited := @extschema@._channel_promotes(v_channel);
        END IF;
        v_id := pg_catalog.nextval('@extschema@.message_id_seq');
        v_key := v_dead.key;
        IF v_key IS NOT NULL THEN
            UPDATE @extschema@.message_key AS k
            SET message_id = v_id, expires_at = NULL
            WHERE
                k.channel_id = v_channel.id
                AND k.key = v_key
                AND (k.message_id = v_dead.id OR k.expires_at <= v_now);
            IF NOT FOUND THEN
                INSERT INTO @extschema@.message_key (channel_id, key, message_id)
                VALUES (v_channel.id, v_key, v_id)
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
        WHERE q.channel_id = v_channel.id;
        -- Deliverable now: ready at its channel's next place, or, in a
        -- channel with limits, due at once for admission (as a create).
        INSERT INTO @extschema@.message (
            id, channel_id, channel, dequeue_at, created_at, content, state, key, attempt_log, position, is_early,
            is_limited, headers
        )
        SELECT
            v_id, v_channel.id, v_channel.name, v_now, v_dead.created_at, v_dead.content, v_dead.state, v_key,
            v_dead.attempt_log,
            CASE WHEN NOT v_limited THEN p.place END, NOT v_limited AND p.is_early,
            @extschema@._channel_claims(v_channel), v_dead.headers
        FROM @extschema@._message_place(v_channel.id, v_bound, v_now, 0) AS p;
        IF v_channel.notify AND NOT v_channel.is_paused THEN
            PERFORM pg_catalog.pg_notify('lonnymq', COALESCE(v_channel.notify_payload, v_channel.name));
        END IF;
        DELETE FROM @extschema@.dead_letter AS d WHERE d.id = v_dead.id;
        v_count := v_count + 1;
    END LOOP;
    CLOSE v_cursor;
    -- (Counted, lonnymq_messages_created_total: a sequence, no row.)
    PERFORM pg_catalog.nextval('@extschema@.messages_created_seq') FROM pg_catalog.generate_series(1, v_count);
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION @extschema@.dead_letter_redrive(text, bigint[]) IS
'Put dead letters back as new messages deliverable now: those of p_channel and/or with an id in p_ids (all when both are NULL). Returns how many.';

REVOKE ALL ON FUNCTION @extschema@.dead_letter_redrive(text, bigint[]) FROM PUBLIC;
