-- Internal: note, for a raise of the marks later in this transaction, the
-- least key of message_due_ix (greatest(dequeue_at, created_at)) of a row
-- that this transaction took out of the due view: a due message it promoted
-- or buried (a schedule's occurrence among them), an expired lock it
-- completed.  The raise reads the queue
-- as this transaction sees it, where such a row is no longer due; if the
-- transaction then rolls back (a worker that crashes, a SERIALIZABLE commit
-- that fails), the row is due again with that key, and a due mark raised
-- past it would leave it below the mark, never promoted by a dequeue.  So
-- _marks_raise keeps the due mark at or below the noted key.  Kept in the
-- transaction-local setting lonnymq.due_taken (gone when the transaction
-- ends); only the calls that take such rows, none of the common worker
-- loop's, write it.
-- Parameters: p_key, the key of a row taken out of the due view.
-- Returns: nothing.
-- Calls: none.
-- Tables: none (a setting).
-- Locks: none.
CREATE FUNCTION @extschema@._due_taken_note(p_key bigint)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.set_config(
        'lonnymq.due_taken',
        LEAST(p_key, NULLIF(pg_catalog.current_setting('lonnymq.due_taken', TRUE), '')::bigint)::text,
        TRUE
    )
$$;

COMMENT ON FUNCTION @extschema@._due_taken_note(bigint) IS
'Internal: note the least due key this transaction took out of the due view (promoted, completed, run), which a raise of the due mark in it must not pass.';

REVOKE ALL ON FUNCTION @extschema@._due_taken_note(bigint) FROM PUBLIC;
