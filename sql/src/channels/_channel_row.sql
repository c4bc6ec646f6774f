-- Internal: a channel's row by its id and name (none when it has no row;
-- p_channel NULL: whatever its name), read newest version first.  A
-- limited channel's row is written at every admission and completion (a
-- max_size channel's at every completion), and under a long-held snapshot (a report, a replica's
-- feedback) none of its versions can be pruned: a probe "id = p" reads
-- channel_pkey's entries in heap order, oldest first, one heap page per
-- entry, hundreds after a minute.  Backwards from the last entry, the
-- newest version comes first (a version is written on the row's page, or a
-- newer page when that is full), and LIMIT 1 stops there: 2 buffers.  The
-- order is a matter of cost only: one version at most is visible to a
-- snapshot.  SQL, STABLE, a set: inlined into its callers' plans (a scalar
-- sub-select or a lateral item; a row lock takes the query written out,
-- as _channel_admit does).  The name is checked inside the LIMIT, so that
-- no node is added above it: only a second name with the same id (about
-- one chance in 10^12) reads every version.
-- Parameters: p_channel_id, the channel's id (_channel_id); p_channel,
--   its name, or NULL.
-- Returns: its row, or no row.
-- Calls: none.
-- Tables: reads channel (channel_pkey, backwards).
-- Locks: none.
CREATE FUNCTION @extschema@._channel_row(p_channel_id bigint, p_channel text)
RETURNS SETOF @extschema@.channel
LANGUAGE sql STABLE ROWS 1
AS $$
    SELECT c.*
    FROM @extschema@.channel AS c
    WHERE c.id >= p_channel_id AND c.id <= p_channel_id AND (p_channel IS NULL OR c.name = p_channel)
    ORDER BY c.id DESC
    LIMIT 1
$$;

COMMENT ON FUNCTION @extschema@._channel_row(bigint, text) IS
'Internal: a channel''s row, read newest version first (bounded under a held snapshot).';

REVOKE ALL ON FUNCTION @extschema@._channel_row(bigint, text) FROM PUBLIC;
