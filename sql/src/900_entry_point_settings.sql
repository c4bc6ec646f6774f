-- The planner settings of lonnymq's entry points, every SECURITY DEFINER
-- function (all public ones but grant_access, revoke_access and the inlined
-- to_epoch), set here once rather than in each header; the internal
-- functions they call run with them too.  Their plans are made once per
-- session and must be right at any size of the tables (doc/README.md,
-- Indexes): generic plans, and no sequential scan, bitmap scan, merge join
-- or (unless a function's header turns it on) hash join, which a plan made
-- while a table looked empty could choose and keep.  (Found on a vacuumed
-- channel_floor, zero pages: dead_letter_redrive walked it sequentially.)
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
            AND p.prosecdef
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
