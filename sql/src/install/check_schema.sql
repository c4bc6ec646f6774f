-- An install (not an upgrade) goes only into a schema of its own: empty,
-- owned by the role that installs (or by a role it is a member of: a
-- superuser restoring a dump of a database whose owner installed lonnymq,
-- where pg_dump made the schema and gave it to that owner), and where no
-- other role may create objects.  CREATE EXTENSION makes the schema lonnymq
-- when it is missing but takes one that exists as it is, and the script
-- would then run beside, and could call, objects that another role put
-- there.  The SQL-only install refuses any existing schema before it creates
-- its own (tools/build_sql_only.py).
DO $lonnymq_check$
DECLARE
    v_schema oid;
    v_owner oid;
    v_objects bigint;
    v_open boolean;
BEGIN
    SELECT n.oid, n.nspowner INTO v_schema, v_owner
    FROM pg_catalog.pg_namespace AS n
    WHERE n.nspname = '@extschema@';
    SELECT
        (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class AS o WHERE o.relnamespace = v_schema)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc AS o WHERE o.pronamespace = v_schema)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_type AS o WHERE o.typnamespace = v_schema)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_operator AS o WHERE o.oprnamespace = v_schema)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_opfamily AS o WHERE o.opfnamespace = v_schema)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_collation AS o WHERE o.collnamespace = v_schema)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_conversion AS o WHERE o.connamespace = v_schema)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_statistic_ext AS o WHERE o.stxnamespace = v_schema)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_ts_config AS o WHERE o.cfgnamespace = v_schema)
        + (SELECT pg_catalog.count(*) FROM pg_catalog.pg_ts_dict AS o WHERE o.dictnamespace = v_schema),
        EXISTS (
            SELECT FROM pg_catalog.pg_namespace AS n, pg_catalog.aclexplode(n.nspacl) AS a
            WHERE n.oid = v_schema AND a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner
        )
    INTO v_objects, v_open;
    IF v_objects > 0 OR v_open OR NOT pg_catalog.pg_has_role(current_user, v_owner, 'USAGE') THEN
        RAISE EXCEPTION 'schema @extschema@ already exists (owner %, % objects%): lonnymq installs into a schema of its own',
            pg_catalog.pg_get_userbyid(v_owner), v_objects,
            CASE WHEN v_open THEN ', other roles may create in it' ELSE '' END
        USING
            ERRCODE = '42P06',
            HINT = CASE
                WHEN '@extschema@' <> 'lonnymq'
                    THEN 'Install it with CREATE SCHEMA lonnymq; CREATE EXTENSION lonnymq SCHEMA lonnymq; nothing was installed.'
                ELSE 'Rename or drop that schema, or install lonnymq by a role that owns an empty one; nothing was installed.'
            END;
    END IF;
END;
$lonnymq_check$;
