-- An install (not an upgrade) goes only into a schema of its own: empty, and
-- owned by the role that installs.  CREATE EXTENSION makes the schema
-- lonnymq when it is missing but takes one that exists as it is, and the
-- script would then run beside, and could call, objects that another role
-- put there (and the tables of another application would become lonnymq's
-- neighbours in every dump).  The SQL-only install checks the same before
-- it creates the schema (tools/build_sql_only.py).
DO $lonnymq_check$
DECLARE
    v_owner text;
    v_objects bigint;
BEGIN
    SELECT
        pg_catalog.pg_get_userbyid(n.nspowner),
        (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class AS c WHERE c.relnamespace = n.oid)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc AS p WHERE p.pronamespace = n.oid)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_type AS t WHERE t.typnamespace = n.oid AND t.typrelid = 0)
    INTO v_owner, v_objects
    FROM pg_catalog.pg_namespace AS n
    WHERE n.nspname = '@extschema@';
    IF v_objects > 0 OR v_owner IS DISTINCT FROM current_user THEN
        RAISE EXCEPTION 'schema @extschema@ already exists (owner %, % objects): lonnymq installs into a schema of its own',
            v_owner, v_objects
        USING
            ERRCODE = '42P06',
            HINT = 'Rename or drop that schema, or install lonnymq by a role that owns an empty one; nothing was installed.';
    END IF;
END;
$lonnymq_check$;
