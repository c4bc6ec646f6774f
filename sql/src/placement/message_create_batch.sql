-- Create many messages in one channel with one call: one id per input, in
-- input order (ids ascending in input order, so a batch with one dequeue_at
-- is delivered in input order); NULL for a message dropped because the
-- channel is at max_size (the first ones in input order are kept).  Keys
-- deduplicate as in message_create, also within the batch (a repeated key
-- gives the first occurrence's id); unlike message_create, it deletes no
-- ended claims.  NULL p_dequeue_at (or a NULL element) means the
-- transaction start; NULL p_keys (or a NULL element) means no key; NULL
-- p_headers (or a NULL element) means no headers.
-- Set-based: one INSERT for the messages; keys are claimed with one INSERT
-- and only those it did not claim are looked at one by one.  The ready
-- messages of a channel without limits take its next turns, one per round,
-- in (dequeue_at, id) order, from one _message_place.  Early, as
-- message_create's are: one with the default dequeue_at more than a second
-- before the channel's last ready message, one with a given dequeue_at any
-- time before it; when that last message is itself early, by
-- _message_early_behind (before the latest early message, or before the
-- last one that is not early), per message.  In a channel
-- with limits, or from a SERIALIZABLE producer, they all wait, due at once
-- in message_due_ix, as message_create's do.
-- p_after, p_after_mode: every message of the call waits for the same
-- parents, as message_create's (doc/dependencies.md); with a dead letter
-- among them, every one goes to the dead letters at once.
-- Parameters: p_channel, the channel's name (not a pattern); p_contents,
--   the payloads; p_dequeue_at, each one's dequeue_at (NULL, or a NULL
--   element: the transaction's start); p_keys, each one's deduplication key
--   (NULL, or a NULL element: none); p_headers, each one's headers, a JSON
--   object (NULL, or a NULL element: none); p_after, the ids of the
--   messages they all wait for (NULL or empty: none); p_after_mode,
--   'completed' (NULL: the default) or 'ended'.  The arrays' lengths must
--   match.
-- Returns: one id per input, in input order: the new message's, the
--   holder's for a claimed key, NULL for one dropped at max_size.
-- Calls: _check_message_channel, _check_batch, _channel_guard_shared,
--   _epoch_enter, _clock_ms, _now_ms, _channel_config, _channel_id,
--   _channel_promotes, _channel_claims, _message_key_claim, _channel_quota_take, _message_place,
--   _message_early_behind (only behind an early message), _round_size and
--   _early_margin_ms (constants); with p_after, _check_after,
--   _message_after, _message_dead_created, _message_edges_link,
--   _waiting_dequeue_at.
-- Tables: reads message_key (message_key_pkey: the keys not claimed at
--   once); writes message_id_seq (nextval, one per input), message_key
--   (insert; delete of a dropped message's claim), message (insert),
--   messages_created_seq (nextval) (channel read by _channel_config;
--   message by _message_place; channel_quota by _channel_quota_take).
-- Locks: the message_key rows it inserts (the INSERT waits for a concurrent
--   producer of the same key).  Its callees', in this order: the channel
--   guard (1819111681, or from a transaction's 33rd guard its bucket guard
--   1819111682) shared (_channel_guard_shared) and the epoch's parity
--   (1819111690) shared (_epoch_enter), both until the transaction ends;
--   with max_size, the channel_quota row FOR UPDATE until the transaction
--   ends (_channel_quota_take); with p_after, the parents' rows (as
--   message_create's, _message_after).  No channel row is locked.
CREATE FUNCTION @extschema@.message_create_batch(
    p_channel text,
    p_contents bytea[],
    p_dequeue_at bigint[] DEFAULT NULL,
    p_keys text[] DEFAULT NULL,
    p_headers jsonb[] DEFAULT NULL,
    p_after bigint[] DEFAULT NULL,
    p_after_mode text DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer;
    v_bound bigint;
    v_limited boolean;
    v_next bigint;
    v_last_at bigint;
    v_last_is_early boolean;
    v_now bigint;
    v_default bigint;
    v_channel @extschema@.channel%ROWTYPE;
    v_ids bigint[];
    v_out bigint[];
    v_keep boolean[];
    v_claimed bigint;
    v_keyed bigint;
    v_room integer;
    v_dropped bigint[] := '{}';
    v_dropped_keys text[] := '{}';
    v_ready_at bigint;
    v_key text;
    v_existing bigint;
    v_after bigint[];
    v_dead_parent bigint;
    i integer;
BEGIN
    IF p_channel IS NULL OR pg_catalog.length(p_channel) NOT BETWEEN 1 AND 255 OR pg_catalog.right(p_channel, 1) = '*' THEN
        PERFORM @extschema@._check_message_channel(p_channel);
    END IF;
    v_n := @extschema@._check_batch(p_contents, p_dequeue_at, p_keys, p_headers);
    IF p_after IS NOT NULL OR p_after_mode IS NOT NULL THEN
        PERFORM @extschema@._check_after(p_after, p_after_mode);
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;

    PERFORM @extschema@._channel_guard_shared(p_channel);
    v_bound := @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    v_default := @extschema@._now_ms();
    v_channel := @extschema@._channel_config(@extschema@._channel_id(p_channel), p_channel);
    -- Waiting for a dequeue to admit or place them, as message_create's:
    -- a channel with limits whose takes do not claim, or a SERIALIZABLE
    -- producer.
    -- (With p_after: waiting, or due at once when none is left to wait for.)
    v_limited := @extschema@._channel_promotes(v_channel)
        OR pg_catalog.current_setting('transaction_isolation') = 'serializable' OR p_after IS NOT NULL;
    v_ids := ARRAY(
        SELECT s.id
        FROM (
            SELECT pg_catalog.nextval('@extschema@.message_id_seq') AS id
            FROM pg_catalog.generate_series(1, v_n)
        ) AS s
        ORDER BY s.id
    );
    v_out := v_ids;
    v_keep := pg_catalog.array_fill(TRUE, ARRAY[v_n]);

    IF p_keys IS NOT NULL THEN
        -- Claim every key at once; the first occurrence of a repeated key
        -- wins.  Only when fewer were claimed than given (a key held, or
        -- repeated) are the others found, one probe each, and resolved one
        -- by one: a batch of new keys costs one INSERT and no loop.
        WITH claimed AS (
            INSERT INTO @extschema@.message_key AS mk (channel_id, key, message_id)
            SELECT v_channel.id, k.key, v_ids[k.i]
            FROM ROWS FROM (pg_catalog.unnest(p_keys)) WITH ORDINALITY AS k (key, i)
            WHERE k.key IS NOT NULL
            ORDER BY k.i
            ON CONFLICT (channel_id, key) DO NOTHING
            RETURNING 1
        )

        SELECT
            (SELECT pg_catalog.count(*) FROM claimed),
            (SELECT pg_catalog.count(k.key) FROM pg_catalog.unnest(p_keys) AS k (key))
        INTO v_claimed, v_keyed;
        IF v_claimed < v_keyed THEN
            FOR i IN
                SELECT k.i
                FROM ROWS FROM (pg_catalog.unnest(p_keys)) WITH ORDINALITY AS k (key, i)
                WHERE
                    k.key IS NOT NULL
                    AND NOT EXISTS (
                        SELECT FROM @extschema@.message_key AS mk
                        WHERE mk.channel_id = v_channel.id AND mk.key = k.key AND mk.message_id = v_ids[k.i]
                    )
                ORDER BY k.i
            LOOP
                v_key := p_keys[pg_catalog.array_lower(p_keys, 1) + i - 1];
                v_existing := @extschema@._message_key_claim(v_channel.id, v_key, v_ids[i], v_now);
                IF v_existing IS NOT NULL THEN
                    v_out[i] := v_existing;
                    v_keep[i] := FALSE;
                END IF;
            END LOOP;
        END IF;
    END IF;

    -- The parents, locked and classified (_message_after, as
    -- message_create's): with a dead letter among them, every message
    -- stored goes to the dead letters at once, before taking room.
    IF p_after IS NOT NULL THEN
        SELECT a.parents, a.dead_parent INTO v_after, v_dead_parent
        FROM @extschema@._message_after(p_after, p_after_mode) AS a;
        IF v_dead_parent IS NOT NULL THEN
            PERFORM @extschema@._message_dead_created(
                ARRAY(
                    SELECT CASE WHEN k.keep THEN v_ids[k.i] END
                    FROM ROWS FROM (pg_catalog.unnest(v_keep)) WITH ORDINALITY AS k (keep, i)
                    ORDER BY k.i
                ),
                v_channel.id, v_channel.name, p_contents,
                COALESCE(p_keys, pg_catalog.array_fill(NULL::text, ARRAY[v_n])),
                COALESCE(p_headers, pg_catalog.array_fill(NULL::jsonb, ARRAY[v_n])), v_now, v_dead_parent, p_after,
                p_after_mode
            );
            RETURN QUERY
            SELECT o.id
            FROM ROWS FROM (pg_catalog.unnest(v_out)) WITH ORDINALITY AS o (id, i)
            ORDER BY o.i;
            RETURN;
        END IF;
    END IF;

    IF v_channel.max_size IS NOT NULL THEN
        -- Room for the new ones (not the duplicates), in input order.
        v_room := @extschema@._channel_quota_take(
            v_channel.id, v_channel.max_size,
            (SELECT pg_catalog.count(*)::integer FROM pg_catalog.unnest(v_keep) AS k (keep) WHERE k.keep)
        );
        FOR i IN 1..v_n LOOP
            CONTINUE WHEN NOT v_keep[i];
            IF v_room > 0 THEN
                v_room := v_room - 1;
            ELSE
                v_keep[i] := FALSE;
                v_dropped := v_dropped || v_ids[i];
                IF p_keys IS NOT NULL THEN
                    v_dropped_keys := v_dropped_keys || p_keys[pg_catalog.array_lower(p_keys, 1) + i - 1];
                END IF;
                v_out[i] := NULL;
            END IF;
        END LOOP;
        IF pg_catalog.cardinality(v_dropped) > 0 THEN
            DELETE FROM @extschema@.message_key AS k
            WHERE
                k.channel_id = v_channel.id
                AND k.key = ANY(v_dropped_keys)
                AND k.message_id = ANY(v_dropped);
            -- A repeat of a dropped message's key is dropped with it.
            FOR i IN 1..v_n LOOP
                IF v_out[i] = ANY(v_dropped) THEN
                    v_out[i] := NULL;
                END IF;
            END LOOP;
        END IF;
    END IF;

    -- Waiting: out of reach of message_due_ix until their last parent ends.
    IF v_after IS NOT NULL THEN
        PERFORM @extschema@._message_edges_link(
            ARRAY(
                SELECT v_ids[k.i]
                FROM ROWS FROM (pg_catalog.unnest(v_keep)) WITH ORDINALITY AS k (keep, i)
                WHERE k.keep
            ),
            v_after, COALESCE(p_after_mode, 'completed')
        );
    END IF;

    SELECT pg_catalog.min(COALESCE(r.dequeue_at, v_default)) INTO v_ready_at
    FROM ROWS FROM (pg_catalog.unnest(p_dequeue_at), pg_catalog.unnest(v_keep)) AS r (dequeue_at, keep)
    WHERE r.keep AND COALESCE(r.dequeue_at, v_default) <= v_now;
    IF v_ready_at IS NOT NULL AND NOT v_limited THEN
        SELECT p.place, p.last_dequeue_at, p.last_is_early
        INTO v_next, v_last_at, v_last_is_early
        FROM @extschema@._message_place(v_channel.id, v_bound, v_ready_at, @extschema@._early_margin_ms()) AS p;
    END IF;

    -- The ready ones take the channel's next turns, one a round, in
    -- (dequeue_at, id) order; those more than a second before the channel's
    -- last ready message are early (_message_place).
    INSERT INTO @extschema@.message (
        id, channel_id, channel, dequeue_at, created_at, content, key, position, is_early, is_held, is_limited, headers
    )
    SELECT
        v_ids[r.i], v_channel.id, v_channel.name,
        CASE WHEN v_after IS NOT NULL THEN @extschema@._waiting_dequeue_at(r.at) ELSE r.at END, v_now, r.content, r.key,
        CASE WHEN r.is_ready THEN
            v_next + @extschema@._round_size() * (pg_catalog.row_number() OVER (PARTITION BY r.is_ready ORDER BY r.at, r.i) - 1)
        END,
        -- (Behind an early message, as message_create does: the latest
        -- early one and the last that is not early, _message_early_behind.)
        r.is_ready AND CASE
            WHEN v_last_is_early THEN @extschema@._message_early_behind(v_channel.id, v_bound, r.at, r.margin)
            ELSE COALESCE(r.at < v_last_at - r.margin, FALSE)
        END,
        FALSE, @extschema@._channel_claims(v_channel), r.headers
    FROM (
        SELECT c.content, COALESCE(c.dequeue_at, v_default) AS at, c.key, c.headers, c.i,
            -- (How far before the channel's last ready message it may sort
            -- without being early: a default dequeue_at's margin, else none.)
            CASE WHEN c.dequeue_at IS NULL THEN @extschema@._early_margin_ms() ELSE 0 END AS margin,
            COALESCE(c.dequeue_at, v_default) <= v_now AND NOT v_limited AS is_ready,
            -- (Counted, lonnymq_messages_created_total: a sequence, no row;
            -- a volatile column, which the planner keeps.)
            pg_catalog.nextval('@extschema@.messages_created_seq') AS counted
        FROM ROWS FROM (
            pg_catalog.unnest(p_contents),
            pg_catalog.unnest(p_dequeue_at),
            pg_catalog.unnest(p_keys),
            pg_catalog.unnest(p_headers)
        ) WITH ORDINALITY AS c (content, dequeue_at, key, headers, i)
        WHERE v_keep[c.i]
    ) AS r
    ORDER BY r.i;

    IF v_ready_at IS NOT NULL THEN
        IF v_channel.notify AND NOT v_channel.is_paused THEN
            PERFORM pg_catalog.pg_notify('lonnymq', COALESCE(v_channel.notify_payload, v_channel.name));
        END IF;
    END IF;

    RETURN QUERY
    SELECT o.id
    FROM ROWS FROM (pg_catalog.unnest(v_out)) WITH ORDINALITY AS o (id, i)
    ORDER BY o.i;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_create_batch(text, bytea[], bigint[], text[], jsonb[], bigint[], text) IS
'Create many messages in one channel: one id per input in input order (the existing id for a duplicate key, NULL for one dropped at max_size). Array lengths must match (22023).';

REVOKE ALL ON FUNCTION @extschema@.message_create_batch(
    text, bytea[], bigint[], text[], jsonb[], bigint[], text
) FROM PUBLIC;
