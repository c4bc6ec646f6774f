-- Internal: complete locked messages, p_ids[k] with fencing token
-- p_num_attempts[k], on behalf of p_caller; the one completion of
-- message_complete, message_complete_batch and message_complete_dequeue.
-- Returns the ids completed; a pair with a stale token, a message that is not
-- locked or is locked by another role is skipped (changes nothing), and with
-- p_report each id not completed is a NOTICE with SQLSTATE 01LQ1 and the id
-- and token in its detail (message_complete_dequeue: a worker can log it; its
-- result has no room for it, and a transaction-local setting would be lost
-- under autocommit).  Each completion is counted in
-- lonnymq_messages_completed_total.
--
-- One statement for messages of channels without configuration: the DELETE by
-- primary key (one probe per pair); once a channel was ever configured with
-- something a completion follows (channel_followed_seq: history, max_size
-- or a limit), the channel row locks (_channel_rows_lock) and for each
-- deleted message a probe of channel_pkey (_channel_has_row), both out of
-- line, so that a database without such a channel neither runs nor prepares
-- them (channels configured with retries, backoff, a dedup window or
-- notify only cost a completion nothing); once a
-- pattern was ever set (channel_pattern_seq), every message is followed, for
-- its pattern's history setting.  What keyed messages, admitted ones and
-- configured channels need follows, only when there is any, from the rows the
-- DELETE returned: channels that retain history (their row's setting, else
-- their pattern's) get their copies; keys are released for their channel's
-- dedup window; max_size channels count the removals (_channel_removed);
-- admitted messages free their places (_channel_admit, per channel in id
-- order; their row locks were taken before the delete); messages others
-- wait for (has_dependents) have their dependents resolved
-- (_message_release: up to 100 each at once in READ COMMITTED, the rest
-- through release rows).
-- Parameters: p_ids, the message ids; p_num_attempts, their fencing tokens
--   (p_num_attempts[k] for p_ids[k]); p_caller, the role completing
--   (_caller_role): a message locked by another role is skipped; p_report, a
--   NOTICE for each id not completed.
-- Returns: the ids completed ('{}' when none).  Invalid arrays raise
--   _check_pairs's errors.
-- Calls: _check_pairs, _clock_ms, _channel_rows_lock, _channel_has_row,
--   _channel_row (inlined), _channel_pattern_config (inlined),
--   _message_key_release, _channel_removed, _channel_admit, _due_taken_note
--   (only when it completed an expired lock), _message_release (only for
--   messages with dependents).
-- Tables: reads channel_followed_seq, channel_pattern_seq (whether a
--   channel to follow or a pattern was ever made); writes message
--   (deletes, by message_pkey), message_history (a copy, for channels that
--   retain history),
--   messages_completed_seq (the counter).  (channel through
--   _channel_rows_lock, _channel_has_row, _channel_row and
--   _channel_pattern_config; message_key through _message_key_release; channel
--   through _channel_removed; channel and held messages through
--   _channel_admit.)
-- Locks: advisory (1819111683, hashint8(channel id)) exclusive until the
--   transaction ends, of the channels of admitted messages and of max_size
--   channels, in key order, before any message is deleted (_channel_rows_lock;
--   none while channel_followed_seq is 0); the message rows it deletes;
--   then, through its callees, the message_key rows they update or delete
--   (_message_key_release), max_size channels' rows (_channel_removed) and,
--   per channel with admitted messages, its row FOR NO KEY UPDATE, held
--   messages FOR UPDATE SKIP LOCKED and the epoch's parity (1819111690) shared
--   (_channel_admit); before the admissions, for messages with dependents,
--   _message_release's (the count-down's buckets, then waiting messages,
--   FOR NO KEY UPDATE in one order, waited for; the epoch's parity
--   shared).
CREATE FUNCTION @extschema@._message_complete_set(
    p_ids bigint[],
    p_num_attempts integer[],
    p_caller pg_catalog.regrole,
    p_report boolean DEFAULT FALSE
)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_now bigint;
    v_gone_ids bigint[];
    v_expired_key bigint;
    v_followed @extschema@.message[];
    -- The completed messages others wait for, and their channels.
    v_parents bigint[];
    v_parent_channel_ids bigint[];
    v_parent_channels text[];
    v_ended record;
    v_admitted record;
BEGIN
    -- One expression for valid input; _check_pairs says what is wrong.
    IF p_ids IS NULL OR p_num_attempts IS NULL
        OR pg_catalog.cardinality(p_ids) <> pg_catalog.cardinality(p_num_attempts)
        OR pg_catalog.cardinality(p_ids) > 10000
        OR pg_catalog.array_ndims(p_ids) > 1 OR pg_catalog.array_ndims(p_num_attempts) > 1
        OR pg_catalog.array_position(p_ids, NULL) IS NOT NULL
        OR pg_catalog.array_position(p_num_attempts, NULL) IS NOT NULL
        OR pg_catalog.cardinality(p_ids) = 0 THEN
        PERFORM @extschema@._check_pairs(p_ids, p_num_attempts);
        RETURN '{}';
    END IF;
    v_now := @extschema@._clock_ms();

    -- By primary key only ("= ANY": an index condition by shape, no join
    -- whose plan could walk message_pkey), each message checked against its
    -- own pair's token (array_position: the first pair of its id; a
    -- repeated id's later pairs are reported as not completed).
    -- Channel rows before message rows: the channels whose counts the
    -- completion changes (limits, max_size) have their row locks
    -- (_channel_rows_lock) taken, in key order, before any message is
    -- deleted (an InitPlan, evaluated before the first delete).  A
    -- completion that deleted first and then waited for a channel row
    -- deadlocked with a dequeue that held that row (its own completion's)
    -- while its take followed the deleted message's update chain: FOR
    -- UPDATE SKIP LOCKED waits there (soak test).
    WITH gone AS (
        DELETE FROM @extschema@.message AS m
        WHERE
            m.id = ANY(p_ids)
            AND m.num_attempts = p_num_attempts[pg_catalog.array_position(p_ids, m.id)]
            AND m.is_locked
            AND COALESCE(m.locked_by = p_caller, TRUE)
            -- (No channel ever configured with a limit or max_size: nothing to
            -- lock.)
            AND (
                SELECT pg_catalog.pg_sequence_last_value('@extschema@.channel_followed_seq') = 0
                    OR @extschema@._channel_rows_lock(p_ids)
            )
        RETURNING
            m.id, m.channel_id, m.channel, m.key, m.is_admitted, m.has_dependents, m AS message,
            -- (Counted, lonnymq_messages_completed_total: a sequence, no row.)
            pg_catalog.nextval('@extschema@.messages_completed_seq') AS counted
    )

    -- The messages something must follow: keyed, admitted, or of a
    -- configured channel (history, max_size).
    -- (Sub-selects, not joins: the message's channel is a parameter of
    -- their probe, so the probe is one whatever the plan.)
    SELECT
        pg_catalog.array_agg(g.id),
        pg_catalog.array_agg(g.message) FILTER (
            WHERE g.key IS NOT NULL OR g.is_admitted OR g.has_dependents
            -- (Once a pattern was ever set, every message: its pattern may
            -- keep its history.)
            OR pg_catalog.pg_sequence_last_value('@extschema@.channel_pattern_seq') > 0
            OR pg_catalog.pg_sequence_last_value('@extschema@.channel_followed_seq') > 0
            AND @extschema@._channel_has_row(g.channel_id)
        ),
        -- The least due key of the expired locks completed (a live lock's
        -- is ahead of the clock, where no raise reaches).
        pg_catalog.min(GREATEST((g.message).dequeue_at, (g.message).created_at)) FILTER (
            WHERE (g.message).dequeue_at < v_now
        )
    INTO v_gone_ids, v_followed, v_expired_key
    FROM gone AS g;
    -- A raise later in this transaction must not pass it: rolled back, the
    -- lock is due again (_due_taken_note).
    IF v_expired_key IS NOT NULL THEN
        PERFORM @extschema@._due_taken_note(v_expired_key);
    END IF;

    IF v_followed IS NOT NULL THEN
        INSERT INTO @extschema@.message_history (
            id, channel, key, content, state, num_attempts, created_at, completed_at, headers
        )
        SELECT f.id, f.channel, f.key, f.content, f.state, f.num_attempts, f.created_at, v_now, f.headers
        FROM pg_catalog.unnest(v_followed) AS f
        -- (Scalar sub-selects, which the planner does not turn into joins:
        -- probes by the message's channel whatever the plan.)
        WHERE COALESCE(
            (SELECT c.retain_history FROM @extschema@._channel_row(f.channel_id, f.channel) AS c),
            (SELECT p.retain_history FROM @extschema@._channel_pattern_config(f.channel) AS p)
        );
        -- Keys: each keyed message's claim lasts its channel's dedup window.
        -- And the messages others wait for (has_dependents), collected: a
        -- column of the DELETE's aggregate would cost every completion 8k
        -- instructions (an aggregate is set up again at each call).
        FOR v_ended IN
            SELECT
                f.channel_id, f.channel, f.key, f.id, f.has_dependents,
                CASE WHEN f.key IS NOT NULL THEN COALESCE(
                    (SELECT c.dedup_window_ms FROM @extschema@._channel_row(f.channel_id, f.channel) AS c),
                    (SELECT p.dedup_window_ms FROM @extschema@._channel_pattern_config(f.channel) AS p),
                    0
                ) END AS window_ms
            FROM pg_catalog.unnest(v_followed) AS f
            WHERE f.key IS NOT NULL OR f.has_dependents
        LOOP
            IF v_ended.key IS NOT NULL THEN
                PERFORM @extschema@._message_key_release(v_ended.channel_id, v_ended.key, v_ended.id, v_ended.window_ms, v_now);
            END IF;
            IF v_ended.has_dependents THEN
                v_parents := v_parents || v_ended.id;
                v_parent_channel_ids := v_parent_channel_ids || v_ended.channel_id;
                v_parent_channels := v_parent_channels || v_ended.channel;
            END IF;
        END LOOP;
        -- Their dependents are resolved (_message_release, in a statement
        -- after the DELETE, whose snapshot sees every dependent linked
        -- before it), in this statement, which every followed completion
        -- runs anyway (one of its own would cost the limited worker loop a
        -- statement and two plan nodes a message).  The count-down waits for
        -- the dependents' rows; what follows waits for no row a count-down
        -- holds (the channel rows' locks are this call's since its DELETE,
        -- held messages are taken SKIP LOCKED).
        PERFORM
            @extschema@._channel_removed(ARRAY(SELECT f.channel_id FROM pg_catalog.unnest(v_followed) AS f)),
            CASE WHEN v_parents IS NOT NULL THEN
                @extschema@._message_release(v_parents, v_parent_channel_ids, v_parent_channels, 'completed')
            END;
        -- Admitted messages free their places: the next held ones are
        -- admitted, channel rows locked in id order.
        FOR v_admitted IN
            SELECT
                f.channel_id, pg_catalog.count(*)::integer AS n,
                -- (An expired lock placed again is its channel's
                -- pending delivery.)
                (pg_catalog.count(*) FILTER (WHERE f.position IS NOT NULL))::integer AS pending
            FROM pg_catalog.unnest(v_followed) AS f
            WHERE f.is_admitted
            GROUP BY f.channel_id
            ORDER BY f.channel_id
        LOOP
            PERFORM @extschema@._channel_admit(v_admitted.channel_id, v_admitted.n, v_admitted.pending, v_now, NULL);
        END LOOP;
    END IF;
    -- Looked for only when fewer were completed than asked (n x k
    -- comparisons then), not on every batch.
    IF p_report AND COALESCE(pg_catalog.cardinality(v_gone_ids), 0) < pg_catalog.cardinality(p_ids) THEN
        FOR i IN 1..pg_catalog.cardinality(p_ids) LOOP
            CONTINUE WHEN p_ids[i] = ANY(v_gone_ids);
            RAISE NOTICE 'lonnymq: message % was not completed: stale token, not locked, or locked by another role',
                p_ids[i]
                USING ERRCODE = '01LQ1', DETAIL = pg_catalog.format('id=%s num_attempts=%s', p_ids[i], p_num_attempts[i]);
        END LOOP;
    END IF;
    RETURN COALESCE(v_gone_ids, '{}');
END;
$$;

COMMENT ON FUNCTION @extschema@._message_complete_set(bigint[], integer[], pg_catalog.regrole, boolean) IS
'Internal: complete locked messages (p_ids[k] with token p_num_attempts[k]) held by p_caller or by no role; returns the ids completed (p_report: a NOTICE for each one not).';

REVOKE ALL ON FUNCTION @extschema@._message_complete_set(bigint[], integer[], pg_catalog.regrole, boolean) FROM PUBLIC;
