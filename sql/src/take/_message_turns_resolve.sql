-- Internal: give each of a dequeue's turns (the first turns of the round
-- order, locked by the calling dequeue) to its channel's first
-- ready message in (dequeue_at, id) order.  The rare case of the take:
-- message_complete_dequeue calls it when a message of its turns' channels
-- is early (message.is_early: placed at the back although it sorts before
-- others of its channel: a priority message, a recovered lock, a long
-- transaction's now()) and sorts before a turn's holder, and then takes
-- what it returns.
--
-- Per channel: its k turns here, their holders and up to k of its other
-- early messages (message_early_ix, FOR UPDATE SKIP LOCKED: one that
-- another consumer is taking is left to it), ranked in (dequeue_at, id)
-- order.  The first k get the k turns in order; holders beyond them take
-- the places of the early messages that got turns, and become early
-- themselves (but a holder that holds a claim, and an early message that
-- does, keep their own turns: the caller counted a claim for each other
-- turn).  So every turn delivers its channel's first message, the
-- channel's order is (dequeue_at, id), each channel keeps one turn per
-- round, and the cost is one write per holder displaced.
-- Parameters: p_turns, the turns with their holders, locked by the caller.
-- Returns: the turns, each with the message it delivers, in turn order.
-- Calls: none.
-- Tables: reads position_mark_seq (its last value), message (message_pkey:
--   whether a turn's holder holds a claim; message_early_ix: each channel's
--   early messages, at or above the position mark);
--   writes message (the displaced holders' position and is_early, by
--   message_pkey).
-- Locks: the early messages it reads FOR UPDATE SKIP LOCKED, until the
--   transaction ends (the caller takes those that got turns); it updates the
--   displaced holders, which the caller had locked.
CREATE FUNCTION @extschema@._message_turns_resolve(p_turns @extschema@._turn[])
RETURNS @extschema@._turn[]
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_turns @extschema@._turn[];
    v_move_ids bigint[];
    v_move_positions bigint[];
    -- Every ready message lies at or above the position mark: the early
    -- messages' probe tests it on each entry, which passes the dead entries
    -- of those taken since (message_early_ix).  (A variable: an index
    -- condition, where the sequence's volatile read would be a filter.)
    v_mark bigint := pg_catalog.pg_sequence_last_value('@extschema@.position_mark_seq');
    -- A turn whose holder holds a claim (a recovered lock of a channel whose
    -- takes claim) delivers it: the take counted no claim for it, and one
    -- delivered in its place would need one.  (Only a recovered lock can
    -- hold one: the locked holders, by primary key, "= ANY": an index
    -- condition by shape; a statement of its own, so that the ranking below
    -- reads no table.)
    v_fixed bigint[] := ARRAY(
        SELECT x.id FROM @extschema@.message AS x
        WHERE x.id = ANY(ARRAY(SELECT t.id FROM pg_catalog.unnest(p_turns) AS t WHERE t.is_locked))
            AND x.is_limited AND x.is_admitted
    );
BEGIN
    WITH fixed AS MATERIALIZED (
        SELECT h.id, h.channel_id, h.dequeue_at, h.is_locked, h.position
        FROM pg_catalog.unnest(p_turns) AS h
        WHERE h.id = ANY(v_fixed)
    ),

    head AS (
        SELECT h.id, h.channel_id, h.dequeue_at, h.is_locked, h.position
        FROM pg_catalog.unnest(p_turns) AS h
        WHERE h.id <> ALL(v_fixed)
    ),

    early AS MATERIALIZED (
        SELECT e.id, e.channel_id, e.dequeue_at, e.is_locked, e.position
        FROM (
            SELECT h.channel_id, pg_catalog.count(*) AS k
            FROM head AS h
            GROUP BY h.channel_id
        ) AS c
        CROSS JOIN LATERAL (
            SELECT x.id, x.channel_id, x.dequeue_at, x.is_locked, x.position
            FROM @extschema@.message AS x
            WHERE
                x.channel_id = c.channel_id AND x.is_early AND x.position >= v_mark
                AND x.id <> ALL(ARRAY(SELECT h.id FROM head AS h))
                -- (Not a recovered lock that holds a claim: the take
                -- counted a claim for each of these turns, which what it
                -- delivers takes; one that holds its own waits for its turn.)
                AND NOT (x.is_limited AND x.is_admitted)
            ORDER BY x.dequeue_at, x.id
            LIMIT c.k
            FOR UPDATE SKIP LOCKED
        ) AS e
    ),

    -- The candidates of each channel, ranked; k is its number of turns.
    ranked AS MATERIALIZED (
        SELECT
            c.*,
            pg_catalog.row_number() OVER (PARTITION BY c.channel_id ORDER BY c.dequeue_at, c.id) AS rank,
            pg_catalog.count(*) FILTER (WHERE c.is_turn) OVER (PARTITION BY c.channel_id) AS k
        FROM (
            SELECT h.*, TRUE AS is_turn FROM head AS h
            UNION ALL
            SELECT e.*, FALSE FROM early AS e
        ) AS c
    ),

    -- A channel's j-th turn, and the place of the j-th early message that
    -- gets a turn.
    turns AS MATERIALIZED (
        SELECT
            r.channel_id, r.position, r.is_turn,
            pg_catalog.row_number() OVER (PARTITION BY r.channel_id, r.is_turn ORDER BY r.position) AS j
        FROM ranked AS r
        WHERE r.is_turn OR r.rank <= r.k
    ),

    -- The j-th turn of a channel delivers its j-th candidate.
    delivered AS (
        SELECT r.id, r.channel_id, r.dequeue_at, r.is_locked, t.position
        FROM ranked AS r
        INNER JOIN turns AS t ON t.channel_id = r.channel_id AND t.is_turn AND t.j = r.rank
        WHERE r.rank <= r.k
    ),

    -- Holders beyond the k-th take, in order, the places of the early
    -- messages that got turns.
    moves AS (
        SELECT d.id, f.position
        FROM (
            SELECT r.id, r.channel_id, pg_catalog.row_number() OVER (PARTITION BY r.channel_id ORDER BY r.rank) AS j
            FROM ranked AS r
            WHERE r.is_turn AND r.rank > r.k
        ) AS d
        INNER JOIN turns AS f ON f.channel_id = d.channel_id AND NOT f.is_turn AND f.j = d.j
    )

    SELECT
        (SELECT pg_catalog.array_agg(v.id) FROM moves AS v),
        (SELECT pg_catalog.array_agg(v.position) FROM moves AS v),
        pg_catalog.array_agg(ROW(d.id, d.channel_id, d.dequeue_at, d.is_locked, d.position)::@extschema@._turn ORDER BY d.position)
    INTO v_move_ids, v_move_positions, v_turns
    FROM (
        SELECT e.id, e.channel_id, e.dequeue_at, e.is_locked, e.position FROM delivered AS e
        UNION ALL
        SELECT f.id, f.channel_id, f.dequeue_at, f.is_locked, f.position FROM fixed AS f
    ) AS d;

    -- By primary key only ("= ANY": an index condition by shape).
    UPDATE @extschema@.message AS m
    SET position = v_move_positions[pg_catalog.array_position(v_move_ids, m.id)], is_early = TRUE
    WHERE m.id = ANY(v_move_ids);
    RETURN v_turns;
END;
$$;

COMMENT ON FUNCTION @extschema@._message_turns_resolve(@extschema@._turn[]) IS
'Internal: give each of a dequeue''s turns to its channel''s first ready message (holders displaced by early messages take their places).';

REVOKE ALL ON FUNCTION @extschema@._message_turns_resolve(@extschema@._turn[]) FROM PUBLIC;
