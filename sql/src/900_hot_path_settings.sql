-- The planner settings of the functions on the hot path, every public
-- message_* function (create, dequeue, settle), set here once rather than
-- in each header; the functions they call run with them too.  Their plans
-- are made once per session and must be right at any size of the tables
-- (doc/README.md, Indexes): generic plans, and no sequential scan, bitmap
-- scan, merge join or (unless a function's header turns it on) hash join,
-- which a plan made while the queue looked empty could choose and keep.
-- make appends this file to the upgrade script too: CREATE OR REPLACE
-- FUNCTION clears a function's settings.
DO $$
DECLARE
    v_function record;
BEGIN
    FOR v_function IN
        SELECT
            p.oid::pg_catalog.regprocedure AS signature,
            NOT COALESCE(p.proconfig @> '{enable_hashjoin=on}', FALSE) AS no_hashjoin
        FROM pg_catalog.pg_proc AS p
        WHERE
            p.pronamespace = '@extschema@'::pg_catalog.regnamespace
            AND p.proname OPERATOR(pg_catalog.~) '^message_'
    LOOP
        EXECUTE pg_catalog.format(
            'ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan SET enable_seqscan = off '
            'SET enable_bitmapscan = off SET enable_mergejoin = off',
            v_function.signature
        );
        IF v_function.no_hashjoin THEN
            EXECUTE pg_catalog.format('ALTER FUNCTION %s SET enable_hashjoin = off', v_function.signature);
        END IF;
    END LOOP;
END;
$$;
