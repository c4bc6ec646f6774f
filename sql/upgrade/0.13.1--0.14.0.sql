-- Schema changes from 0.13.1 to 0.14.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.13.1
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.13.1--0.14.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- @include sql/src/schema/000_check_server.sql

-- The view channel_stats finds the first channel with a range of
-- message_channel_ix's leading column, which PostgreSQL 17 and 18 need.
-- @after functions
-- @include sql/src/api/261_view_channel_stats.sql

-- PostgreSQL 18 keeps NOT NULL constraints in pg_constraint, with names, and
-- a renamed column keeps its constraint's old name (0.11.0 renamed
-- channel.num_locked to num_admitted and message.is_counted to is_admitted):
-- each gets the name a fresh install gives it, <table>_<column>_not_null, so
-- that an updated schema is a fresh one on 18 too (test_upgrade.py).  Before
-- 18 there is no such constraint and this changes nothing.  A later upgrade
-- that renames a column keeps this block.
DO $lonnymq_not_null_names$
DECLARE
    v_constraint record;
BEGIN
    FOR v_constraint IN
        SELECT c.conname, t.relname, t.relname || '_' || a.attname || '_not_null' AS fresh_name
        FROM pg_catalog.pg_constraint AS c
        INNER JOIN pg_catalog.pg_class AS t ON t.oid = c.conrelid
        INNER JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
        WHERE
            t.relnamespace = '@extschema@'::pg_catalog.regnamespace
            AND c.contype = 'n'
            AND c.conname <> t.relname || '_' || a.attname || '_not_null'
    LOOP
        EXECUTE pg_catalog.format(
            'ALTER TABLE @extschema@.%I RENAME CONSTRAINT %I TO %I',
            v_constraint.relname, v_constraint.conname, v_constraint.fresh_name
        );
    END LOOP;
END;
$lonnymq_not_null_names$;
