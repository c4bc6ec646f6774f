-- The planner settings of lonnymq's entry points, every SECURITY DEFINER
-- function of the extension (all public ones but grant_access,
-- revoke_access and the inlined to_epoch), set here once rather than in
-- each header; the internal functions they call run with them too.  Their
-- plans are made once per session and must be right at any size of the
-- tables (doc/README.md, Indexes): generic plans, and no sequential scan,
-- bitmap scan, merge join or hash join, which a plan made while a table
-- looked empty could choose and keep (a table vacuumed to zero pages was
-- walked sequentially by dead_letter_redrive's plan).  No JIT: a plan that
-- keeps a disabled node is costed above jit_above_cost, and compiling it
-- cost a call 100 ms.  No function sets one of these in its header.  make
-- appends this file to the upgrade script too: CREATE OR REPLACE FUNCTION
-- clears a function's settings.  The functions are found by schema, not by
-- extension membership, so that the SQL-only install (no extension) sets
-- them too.
DO $$
DECLARE
    v_setting record;
BEGIN
    FOR v_setting IN
        SELECT p.oid::pg_catalog.regprocedure AS signature, s.name, s.value
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN (
            VALUES
            ('plan_cache_mode', 'force_generic_plan'),
            ('enable_seqscan', 'off'),
            ('enable_bitmapscan', 'off'),
            ('enable_mergejoin', 'off'),
            ('enable_hashjoin', 'off'),
            ('jit', 'off')
        ) AS s (name, value)
        WHERE p.pronamespace = '@extschema@'::pg_catalog.regnamespace AND p.prosecdef
        ORDER BY p.oid, s.name
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET %I = %L', v_setting.signature, v_setting.name, v_setting.value);
    END LOOP;
END;
$$;
