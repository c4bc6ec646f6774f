-- Internal: whether a channel has a row (its configuration), read newest
-- version first (_channel_row says why; a scalar sub-select, which keeps
-- its ORDER BY and LIMIT where EXISTS would drop them).  PL/pgSQL, never
-- inlined: a completion calls it only once a channel was ever configured
-- with something it follows (channel_followed_seq), so that a database
-- without one neither runs nor prepares the probe.
-- Parameters: p_channel_id, the channel's id (_channel_id).
-- Returns: whether it has a row.
-- Calls: none.
-- Tables: reads channel (channel_pkey, backwards).
-- Locks: none.
CREATE FUNCTION @extschema@._channel_has_row(p_channel_id bigint)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN (
        SELECT TRUE FROM @extschema@.channel AS c
        WHERE c.id >= p_channel_id AND c.id <= p_channel_id
        ORDER BY c.id DESC LIMIT 1
    ) IS NOT NULL;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_has_row(bigint) IS
'Internal: whether a channel has a row, read newest version first (bounded under a held snapshot).';

REVOKE ALL ON FUNCTION @extschema@._channel_has_row(bigint) FROM PUBLIC;
