-- Internal: the messages p_ids, which had dependents (has_dependents),
-- ended as p_outcome says ('completed', 'dead', 'cancelled'): their
-- dependents are resolved (_message_waits_resolve).
--   A completion in READ COMMITTED resolves up to _release_batch_size
--   edges of each parent now, so that a dependent whose last parent this
--   was is released by this call.  Its statements come after the DELETE
--   that ended them, whose lock waited for every producer that linked a
--   dependent to them (_message_after's share lock): each statement's new
--   snapshot sees those edges.
--   Everything else goes to a release row: a message row with the parent's
--   id, schedule '' (a due entry that is no message: user calls and counts
--   skip it), key the outcome and state the last child resolved (its id as
--   text), due now in message_due_ix, whose promotion resolves the next
--   edges (_message_release_run).  So does a completion under REPEATABLE READ or
--   SERIALIZABLE, whose snapshot may predate a producer that linked a
--   dependent before its DELETE: any snapshot that sees the release row,
--   committed after that producer, sees its edges.  And a dead or
--   cancelled parent, whose dependents may end in other channels, whose
--   locks a promotion only tries.
-- Parameters: p_ids, the ended messages; p_channel_ids, p_channels, each
--   one's channel (its release row's: a promotion takes the channel's guard
--   before it); p_outcome, how they ended.
-- Returns: nothing.
-- Calls: _message_waits_resolve, _epoch_enter, _clock_ms.
-- Tables: writes message (the release rows) (message_edge, message_wait
--   and the dependents through _message_waits_resolve).
-- Locks: _message_waits_resolve's (the count-down's buckets and children,
--   waited for); the epoch's parity (1819111690) shared until the
--   transaction ends (_epoch_enter: a release row is a due entry).
CREATE FUNCTION @extschema@._message_release(
    p_ids bigint[],
    p_channel_ids bigint[],
    p_channels text[],
    p_outcome text
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_left bigint[] := p_ids;
    v_cursors bigint[];
    v_now bigint;
BEGIN
    IF p_outcome = 'completed' AND pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        SELECT pg_catalog.array_agg(r.parent_id), pg_catalog.array_agg(r.cursor)
        INTO v_left, v_cursors
        FROM @extschema@._message_waits_resolve(
            p_ids, pg_catalog.array_fill(0::bigint, ARRAY[pg_catalog.cardinality(p_ids)]), p_outcome
        ) AS r;
        IF v_left IS NULL THEN
            RETURN;
        END IF;
    END IF;
    PERFORM @extschema@._epoch_enter();
    v_now := @extschema@._clock_ms();
    INSERT INTO @extschema@.message (id, channel_id, channel, dequeue_at, created_at, content, schedule, key, state)
    SELECT
        l.id, p_channel_ids[pg_catalog.array_position(p_ids, l.id)], p_channels[pg_catalog.array_position(p_ids, l.id)],
        v_now, v_now, '\x'::bytea, '', p_outcome, pg_catalog.convert_to(COALESCE(l.cursor, 0)::text, 'UTF8')
    FROM ROWS FROM (pg_catalog.unnest(v_left), pg_catalog.unnest(v_cursors)) AS l (id, cursor)
    ORDER BY l.id;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_release(bigint[], bigint[], text[], text) IS
'Internal: ended messages with dependents: resolve them now (a completion in READ COMMITTED, up to 100 each) or through release rows.';

REVOKE ALL ON FUNCTION @extschema@._message_release(bigint[], bigint[], text[], text) FROM PUBLIC;
