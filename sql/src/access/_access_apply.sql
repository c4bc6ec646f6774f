-- Internal: (re)apply the grants of one role and access set, or of every
-- recorded grant when both are NULL (upgrade scripts call this after adding
-- functions to a set); one of them alone applies that role's or that set's
-- recorded grants (revoke_access re-applies the role's others).  Roles that no
-- longer exist are skipped.  Each grant: USAGE on the schema, EXECUTE on the
-- set's functions (_access_functions), SELECT on the view metrics for monitor,
-- SELECT on every table and view of the schema for admin.  Runs with its
-- caller's rights.  Identifiers are quoted with format('%I').
-- Parameters: p_role, the role (NULL: every role); p_access, the set (NULL:
--   every set).
-- Returns: nothing.
-- Calls: _access_functions.
-- Tables: reads access_grant (access_grant_pkey).
-- Locks: none of lonnymq's (GRANT takes PostgreSQL's own).
CREATE FUNCTION @extschema@._access_apply(
    p_role name DEFAULT NULL,
    p_access text DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_grant record;
    v_function regprocedure;
    v_role name;
BEGIN
    FOR v_grant IN
        SELECT g.role_name, g.access
        FROM @extschema@.access_grant AS g
        WHERE
            (p_role IS NULL OR g.role_name = p_role)
            AND (p_access IS NULL OR g.access = p_access)
            AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname = g.role_name)
    LOOP
        v_role := v_grant.role_name;
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %I TO %I', '@extschema@', v_role);
        FOR v_function IN SELECT f FROM @extschema@._access_functions(v_grant.access) AS f LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', v_function, v_role);
        END LOOP;
        IF v_grant.access = 'monitor' THEN
            EXECUTE pg_catalog.format('GRANT SELECT ON %I.metrics TO %I', '@extschema@', v_role);
        END IF;
        IF v_grant.access = 'admin' THEN
            EXECUTE pg_catalog.format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO %I', '@extschema@', v_role);
        END IF;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@._access_apply(name, text) IS
'Internal: apply recorded access grants (all of them when called without arguments).';

REVOKE ALL ON FUNCTION @extschema@._access_apply(name, text) FROM PUBLIC;
