-- Internal: take the row locks (_channel_row_lock) of the channels whose
-- counts a completion of these messages changes, before it deletes any of them
-- (_message_complete_set says why): the channels of admitted messages and
-- those with max_size, in the locks' key order (a sort of an array's elements,
-- not of a scan's rows; OFFSET 0: locked in that order).  A channel twice
-- takes its lock twice: harmless.  Each row is read newest version first
-- (_channel_row says why).  The messages are read, not locked: one with a
-- stale token costs its channel's lock, nothing more.  PL/pgSQL, never
-- inlined: called only once a channel was ever configured with something a
-- completion follows (channel_followed_seq), so that a database without one
-- neither runs nor prepares these probes.
-- Parameters: p_ids, the ids to complete.
-- Returns: TRUE (a condition of the completion's DELETE).
-- Calls: _channel_row_lock.
-- Tables: reads message (message_pkey: each message's channel and
--   is_admitted), channel (channel_pkey, backwards: whether it has max_size).
-- Locks: advisory (1819111683, hashint8(channel id)) of each such channel,
--   exclusive, waited for, until the transaction ends (_channel_row_lock), in
--   key order.
CREATE FUNCTION @extschema@._channel_rows_lock(p_ids bigint[])
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM @extschema@._channel_row_lock(l.id)
    FROM (
        SELECT l.id
        FROM pg_catalog.unnest(ARRAY(
            SELECT x.channel_id FROM @extschema@.message AS x
            WHERE x.id = ANY(p_ids) AND (x.is_admitted OR (
                SELECT c.max_size IS NOT NULL FROM @extschema@.channel AS c
                WHERE c.id >= x.channel_id AND c.id <= x.channel_id
                ORDER BY c.id DESC LIMIT 1
            ))
        )) AS l (id)
        ORDER BY pg_catalog.hashint8(l.id)
        OFFSET 0
    ) AS l;
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_rows_lock(bigint[]) IS
'Internal: lock the rows of the channels whose counts completing these messages changes (admitted messages'' channels, max_size channels), in key order; returns TRUE.';

REVOKE ALL ON FUNCTION @extschema@._channel_rows_lock(bigint[]) FROM PUBLIC;
