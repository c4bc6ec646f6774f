-- Internal: deletes up to p_limit ended claims (expires_at <= p_now), oldest
-- first (message_key_expiry_ix), skipping those another transaction holds.  By
-- ctid (a TID scan): a join on the key let a plan made while the table looked
-- small walk message_key_pkey without an index condition.  One statement
-- however many: a second one in the same transaction would walk the index
-- entries of what the first deleted (dead to it only once this transaction
-- ends).  Callers: message_create (two at each keyed create), tick() (up to
-- 10000).
-- Parameters: p_now, the clock (claims with expires_at at or before it have
--   ended); p_limit, at most this many.
-- Returns: nothing.
-- Calls: none.
-- Tables: reads message_key (message_key_expiry_ix, oldest first); writes
--   message_key (deletes, by ctid).
-- Locks: the ended claims FOR UPDATE SKIP LOCKED (never waits), then deleted.
CREATE FUNCTION @extschema@._message_key_reap(p_now bigint, p_limit integer)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    DELETE FROM @extschema@.message_key AS k
    WHERE k.ctid = ANY(ARRAY(
        SELECT e.ctid FROM @extschema@.message_key AS e
        WHERE e.expires_at <= p_now
        ORDER BY e.expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED
    ));
$$;

COMMENT ON FUNCTION @extschema@._message_key_reap(bigint, integer) IS
'Internal: deletes up to p_limit ended deduplication claims, oldest first.';

REVOKE ALL ON FUNCTION @extschema@._message_key_reap(bigint, integer) FROM PUBLIC;
