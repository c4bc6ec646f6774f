-- Internal: whether the transaction p_xid had ended before the caller's
-- snapshot was taken, so that the snapshot sees all it wrote.  p_xid is an
-- xid8 kept as a bigint in a sequence (epoch_raiser_seq,
-- schedule_changer_seq), 0 when none is known (a fresh install, a
-- restore): then true.  The question a transaction snapshot (REPEATABLE
-- READ, SERIALIZABLE) asks before it acts on what it cannot see changing;
-- at READ COMMITTED every statement's snapshot is new, and the callers do
-- not ask.  SQL: inlined where its argument is a variable (the planner
-- does not inline a volatile argument used twice).
-- Parameters: p_xid, a transaction id (xid8) as bigint, or 0.
-- Returns: true when it is 0 or visible in pg_current_snapshot().
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._xact_seen(p_xid bigint)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT p_xid = 0 OR pg_catalog.pg_visible_in_snapshot(p_xid::text::pg_catalog.xid8, pg_catalog.pg_current_snapshot())
$$;

COMMENT ON FUNCTION @extschema@._xact_seen(bigint) IS
'Internal: whether the transaction p_xid (xid8 as bigint; 0: none known, true) had ended before the caller''s snapshot.';

REVOKE ALL ON FUNCTION @extschema@._xact_seen(bigint) FROM PUBLIC;
