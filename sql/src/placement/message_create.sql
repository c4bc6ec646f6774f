-- Create a message.  Inside the caller's transaction: the message exists if
-- and only if that transaction commits.
--
-- Two statements in the common case (a channel without limits, no key):
--   1. one SELECT: the epoch (position_bound_seq) and its parity held shared
--      (the epoch guard: a raise of the marks waits for this writer), the
--      channel guard held shared (a configuration change in flight waits
--      for this producer, and it for the change), the channel's
--      configuration (one probe of channel_pkey, which finds no row for a
--      channel without one) and its place in the round order
--      (_message_place: two probes);
--   (a channel without a row, once a pattern was ever set: one more
--   statement, its pattern's configuration, _channel_pattern_config);
--   2. the INSERT, which re-reads the epoch: when a raise started a new
--      epoch after statement 1 read it, the bound may have passed the place,
--      and the two statements run again.
-- Its state follows from its time and its channel:
--   ready      its dequeue_at has passed and its channel has no limit: at
--              its channel's next place; no channel row is written or
--              locked, so producers block neither each other nor consumers;
--   scheduled  its dequeue_at is ahead: message_due_ix promotes it;
--   waiting    its channel has max_concurrency, a release interval or a
--              pause: due at once in message_due_ix, so that a dequeue's
--              promotion holds it and runs its channel's admission
--              (_message_promote; a producer never locks a limited
--              channel's row: producers would wait for each other, and
--              deadlock across channels); and any message of a
--              SERIALIZABLE producer, which a dequeue's promotion places:
--              a placement reads where its channel's last message is, and
--              two serializable producers of one channel that read and
--              insert there would fail each other with 40001.
-- One with max_size counts it (channel_quota: its producers serialise).
--
-- p_key (optional) deduplicates: while a message with that key exists in the
-- channel, or was completed or dead-lettered there less than the channel's
-- dedup_window_ms ago, the existing message's id is returned and nothing is
-- stored (see _message_key_claim).  The key is checked before max_size: a
-- duplicate of a stored message is never reported as dropped.  A keyed
-- create also deletes up to two ended claims (_message_key_reap).  The id,
-- the key's claim and the room are taken once, not again when the epoch
-- changed.
-- p_after (optional, doc/dependencies.md) makes it wait for other
-- messages, in any channels: it is delivered once every one of them still
-- in the queue has completed (p_after_mode 'completed', the default: a
-- dead-lettered parent dead-letters it, a cancelled one cancels it) or
-- ended any way ('ended'), at the later of its own dequeue_at and the last
-- parent's end.  The parents are locked and classified after the channel
-- guard (_message_after): with a dead letter among them (and
-- 'completed'), the message goes to the dead letters at once
-- (_message_dead_created) and its id is returned; one already gone counts
-- as done; with none left to wait for, it is due at once.  A waiting
-- message is a message row out of every probe's reach (its dequeue_at
-- _waiting_dequeue_at(its own)) with its edges and counts
-- (_message_edges_link).
-- With the channel's notify on, a message whose dequeue_at has passed, in
-- a channel that is not paused, sends NOTIFY lonnymq with the channel name
-- (or its notify_payload) as payload (PostgreSQL delivers one per
-- transaction and payload).
-- Parameters: p_channel, the channel's name (not a pattern); p_content, the
--   payload (at most _max_content_bytes); p_dequeue_at, epoch ms before
--   which it is not delivered (NULL: the transaction's start; a past value
--   gives priority within the channel); p_key, a deduplication key (NULL:
--   none); p_headers, a JSON object returned with every delivery (W3C trace
--   context: doc/headers.md; at most _max_headers_bytes of JSON text; NULL:
--   none); p_after, the ids of the messages it waits for (at most 10,000;
--   NULL or empty: none); p_after_mode, 'completed' (NULL: the default) or
--   'ended'.
-- Returns: the new message's id (a dead letter's, when a parent was one);
--   the holder's id when p_key is claimed; NULL when the channel is at
--   max_size (nothing stored).
-- Calls: _channel_id, _now_ms, _max_content_bytes, _check_message_channel,
--   _check_message, _check_headers (any headers), _epoch_hold (inlined),
--   _channel_guard_shared (inlined), _clock_ms, _message_place (inlined),
--   _channel_pattern_config,
--   _channel_promotes, _message_key_reap, _message_key_claim,
--   _channel_quota_take, _message_key_release, _early_margin_ms (a constant),
--   _channel_hold_try (a full channel's message), _channel_claims (a
--   pattern's follower), _check_after, _message_after,
--   _message_dead_created, _message_edges_link, _waiting_dequeue_at (with
--   p_after).
-- Tables: reads position_bound_seq (the epoch, twice), channel
--   (channel_pkey, backwards: newest version first), channel_pattern_seq;
--   writes message (insert), message_id_seq, messages_created_seq (nextval)
--   (message read by _message_place; message_key by the key functions;
--   channel_quota by _channel_quota_take; a pattern's channel row by
--   _channel_pattern_config).
-- Locks: none directly.  Its callees', in this order: the epoch's parity
--   (1819111690) shared (_epoch_hold) and the channel guard (1819111681,
--   or from a transaction's 33rd guard its bucket guard 1819111682) shared
--   (_channel_guard_shared), both until the transaction ends; with a key,
--   its message_key row (the INSERT waits for a concurrent producer of the
--   same key) and ended claims FOR UPDATE SKIP LOCKED (_message_key_reap);
--   with max_size, the channel_quota row FOR UPDATE until the transaction
--   ends (_channel_quota_take); with p_after, the parents' rows FOR KEY
--   SHARE (and FOR NO KEY UPDATE, those it flags) in id order, until the
--   transaction ends (_message_after).  No channel row is locked.
CREATE FUNCTION @extschema@.message_create(
    p_channel text,
    p_content bytea,
    p_dequeue_at bigint DEFAULT NULL,
    p_key text DEFAULT NULL,
    p_headers jsonb DEFAULT NULL,
    p_after bigint[] DEFAULT NULL,
    p_after_mode text DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channel_id bigint := @extschema@._channel_id(p_channel);
    -- The default is the transaction's start, so that messages created in one
    -- transaction share a dequeue_at and keep their order by id.
    v_dequeue_at bigint := COALESCE(p_dequeue_at, @extschema@._now_ms());
    v_epoch bigint;
    v_place bigint;
    v_is_early boolean;
    v_waits boolean;
    -- Not placed by this create, but due at once for a promotion to place or
    -- hold: a SERIALIZABLE producer's message (read once: a setting, not a
    -- query), or one with p_after, which waits for its parents or, with
    -- none left to wait for, is due at once.
    v_is_unplaced boolean := pg_catalog.current_setting('transaction_isolation') = 'serializable';
    v_max_size integer;
    v_notify text;
    v_now bigint;
    v_id bigint;
    v_created bigint;
    v_counted bigint;
    v_has_no_row boolean;
    v_is_limited boolean;
    v_is_full boolean;
    -- (NULL until a full channel's create sets it: an initialiser would be
    -- one more expression for every create.)
    v_is_held boolean;
    -- With p_after (NULL else, without initialisers): the parents it waits
    -- for, and a dead parent that ends it at once.
    v_after bigint[];
    v_dead_parent bigint;
BEGIN
    -- One expression for valid input; the checks say what is wrong.  Headers
    -- are checked only by the checks (any headers go there): PL/pgSQL
    -- prepares this expression again in every transaction, and the four
    -- functions of a headers test here cost every create 9.0k instructions
    -- (bench/instruction_counts.py), headers or not.
    IF p_channel IS NULL OR pg_catalog.length(p_channel) NOT BETWEEN 1 AND 255 OR p_content IS NULL
        OR pg_catalog.octet_length(p_content) > @extschema@._max_content_bytes()
        OR pg_catalog.length(p_key) NOT BETWEEN 1 AND 1024 OR pg_catalog.right(p_channel, 1) = '*'
        OR p_headers IS NOT NULL OR p_after IS NOT NULL OR p_after_mode IS NOT NULL THEN
        PERFORM @extschema@._check_message_channel(p_channel);
        PERFORM @extschema@._check_message(p_content, p_key);
        PERFORM @extschema@._check_headers(p_headers, 'p_headers');
        PERFORM @extschema@._check_after(p_after, p_after_mode);
        v_is_unplaced := v_is_unplaced OR p_after IS NOT NULL;
    END IF;

    LOOP
        -- k is one row whose columns are computed in order: the epoch is
        -- read, its parity and the channel guard held, then the clock read
        -- (a subquery with volatile columns is never flattened into its
        -- caller).
        SELECT
            k.epoch,
            k.now,
            p.place,
            p.is_early,
            -- (_channel_promotes(c) written out: c
            -- is not a whole row.  A channel whose takes claim places its
            -- messages as one without limits does.)
            COALESCE(c.max_concurrency IS NOT NULL AND c.is_ordered OR c.release_interval_ms > 0 OR c.is_paused, FALSE)
            OR v_is_unplaced,
            -- (_channel_claims(c).)
            COALESCE(
                c.max_concurrency IS NOT NULL AND c.release_interval_ms = 0 AND NOT c.is_paused AND NOT c.is_ordered, FALSE
            ),
            c.max_size,
            CASE WHEN c.notify AND NOT c.is_paused THEN COALESCE(c.notify_payload, p_channel) END,
            c.id IS NULL,
            -- (Full: paused, or max_concurrency admitted, without a release
            -- interval, and the message due: _channel_hold_try.)
            COALESCE(c.release_interval_ms = 0 AND (c.is_paused OR c.num_admitted >= c.max_concurrency), FALSE)
            AND v_dequeue_at <= k.now AND NOT v_is_unplaced
        INTO v_epoch, v_now, v_place, v_is_early, v_waits, v_is_limited, v_max_size, v_notify, v_has_no_row, v_is_full
        FROM (
            SELECT
                e.epoch,
                @extschema@._epoch_hold(e.epoch) AS in_epoch,
                @extschema@._channel_guard_shared(p_channel) AS in_channel,
                @extschema@._clock_ms() AS now
            FROM (SELECT pg_catalog.pg_sequence_last_value('@extschema@.position_bound_seq') AS epoch) AS e
        ) AS k
        -- The channel's row, newest version first (_channel_row says why),
        -- written out with the columns read: _channel_row's whole row
        -- would have all 24 built at every call.  (The name, as there, a
        -- condition no index serves: else channel_name_key and a sort.)
        LEFT JOIN LATERAL (
            SELECT
                r.id, r.max_size, r.max_concurrency, r.release_interval_ms, r.is_paused, r.notify, r.notify_payload,
                r.num_admitted, r.is_ordered
            FROM @extschema@.channel AS r
            WHERE r.id >= v_channel_id AND r.id <= v_channel_id AND (p_channel IS NULL OR r.name = p_channel)
            ORDER BY r.id DESC
            LIMIT 1
        ) AS c ON TRUE
        -- (A SERIALIZABLE producer's bound is NULL: the probes' condition
        -- can never hold, so they read nothing.)
        CROSS JOIN LATERAL @extschema@._message_place(
            v_channel_id, CASE WHEN NOT v_is_unplaced THEN k.epoch >> 1 END, v_dequeue_at,
            CASE WHEN p_dequeue_at IS NULL THEN @extschema@._early_margin_ms() ELSE 0 END
        ) AS p;

        -- A channel without a row follows its pattern, if it has one: looked
        -- for only once a pattern was ever set (channel_pattern_seq), so
        -- that producers of a database without patterns read nothing more.
        -- A full channel's message is held at once when the hold guard
        -- allows it (_channel_hold_try), else it waits.  (One condition, so
        -- that producers of other channels evaluate nothing more.)
        IF v_is_full OR v_has_no_row AND pg_catalog.pg_sequence_last_value('@extschema@.channel_pattern_seq') > 0 THEN
            IF v_is_full THEN
                v_is_held := @extschema@._channel_hold_try(v_channel_id, v_dequeue_at);
                -- (Held: no position.  A channel whose takes claim would
                -- place it else.)
                v_waits := v_waits OR v_is_held;
            ELSE
                SELECT
                    COALESCE(@extschema@._channel_promotes(f), FALSE)
                    OR v_is_unplaced,
                    COALESCE(@extschema@._channel_claims(f), FALSE),
                    CASE WHEN f.notify THEN COALESCE(f.notify_payload, p_channel) END
                INTO v_waits, v_is_limited, v_notify
                FROM (SELECT) AS one
                LEFT JOIN LATERAL @extschema@._channel_pattern_config(p_channel) AS f ON TRUE;
            END IF;
        END IF;

        -- Once, not again when the epoch changed.
        IF v_id IS NULL AND (p_key IS NOT NULL OR v_max_size IS NOT NULL OR p_after IS NOT NULL) THEN
            v_id := pg_catalog.nextval('@extschema@.message_id_seq');
            IF p_key IS NOT NULL THEN
                -- Each keyed create deletes up to two ended claims.
                PERFORM @extschema@._message_key_reap(v_now, 2);
                v_created := @extschema@._message_key_claim(v_channel_id, p_key, v_id, v_now);
                IF v_created IS NOT NULL THEN
                    RETURN v_created;
                END IF;
            END IF;
            -- Its parents, locked (after the channel guard, as every
            -- call's message rows) and classified: a dead one ends it at
            -- once, before it takes room in its channel.
            IF p_after IS NOT NULL THEN
                SELECT a.parents, a.dead_parent INTO v_after, v_dead_parent
                FROM @extschema@._message_after(p_after, p_after_mode) AS a;
                IF v_dead_parent IS NOT NULL THEN
                    PERFORM @extschema@._message_dead_created(
                        ARRAY[v_id], v_channel_id, p_channel, ARRAY[p_content], ARRAY[p_key], ARRAY[p_headers], v_now,
                        v_dead_parent, p_after, p_after_mode
                    );
                    RETURN v_id;
                END IF;
            END IF;
            IF v_max_size IS NOT NULL AND @extschema@._channel_quota_take(v_channel_id, v_max_size, 1) = 0 THEN
                IF p_key IS NOT NULL THEN
                    PERFORM @extschema@._message_key_release(v_channel_id, p_key, v_id, 0, 0);
                END IF;
                RETURN NULL;
            END IF;
            -- Waiting: out of reach of message_due_ix until its last parent
            -- ends (_message_waits_count_down).
            IF v_after IS NOT NULL THEN
                PERFORM @extschema@._message_edges_link(ARRAY[v_id], v_after, COALESCE(p_after_mode, 'completed'));
                v_dequeue_at := @extschema@._waiting_dequeue_at(v_dequeue_at);
            END IF;
        END IF;

        INSERT INTO @extschema@.message (
            id, channel_id, channel, dequeue_at, created_at, content, key, position, is_early, is_held, is_limited,
            headers
        )
        SELECT
            COALESCE(v_id, pg_catalog.nextval('@extschema@.message_id_seq')), v_channel_id, p_channel, v_dequeue_at,
            v_now, p_content, p_key,
            CASE WHEN v_dequeue_at <= v_now AND NOT v_waits THEN v_place END,
            v_dequeue_at <= v_now AND NOT v_waits AND v_is_early,
            -- (Held only when this pass found the channel full: a pass
            -- after the epoch changed may not, and keeps an earlier pass's
            -- v_is_held.)
            COALESCE(v_is_full AND v_is_held, FALSE), v_is_limited, p_headers
        WHERE pg_catalog.pg_sequence_last_value('@extschema@.position_bound_seq') = v_epoch
        -- (Counted, lonnymq_messages_created_total: a sequence, no row.)
        RETURNING id, pg_catalog.nextval('@extschema@.messages_created_seq') INTO v_created, v_counted;
        EXIT WHEN v_created IS NOT NULL;
    END LOOP;
    IF v_notify IS NOT NULL AND v_dequeue_at <= v_now THEN
        PERFORM pg_catalog.pg_notify('lonnymq', v_notify);
    END IF;
    RETURN v_created;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_create(text, bytea, bigint, text, jsonb, bigint[], text) IS
'Create a message in a channel (a channel needs no creation). p_dequeue_at: epoch ms before which it is not delivered; past or negative values give priority within the channel. p_key: a deduplication key (the existing message''s id is returned while the key is held). p_headers: a JSON object returned with every delivery (trace context). p_after: ids of messages it waits for (p_after_mode completed, the default, or ended). Returns the id, or NULL when the channel is at max_size (nothing stored).';

REVOKE ALL ON FUNCTION @extschema@.message_create(text, bytea, bigint, text, jsonb, bigint[], text) FROM PUBLIC;
