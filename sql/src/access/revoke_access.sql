-- Take an access set back from a role: its record, EXECUTE on the set's
-- functions, and the set's SELECT grants; USAGE on the schema when the role
-- holds no other set.  Privileges the role still needs for another set it
-- holds are granted again (_access_apply).  Runs with the caller's rights, as
-- grant_access.
-- Parameters: p_role, the role; p_access, producer, consumer, monitor or
--   admin.
-- Returns: nothing.  Errors: _check_access's.
-- Calls: _check_access, _access_functions, _access_apply.
-- Tables: reads access_grant (whether the role holds another set); writes
--   access_grant (deletes the set's row).
-- Locks: the access_grant row it deletes.
CREATE FUNCTION @extschema@.revoke_access(p_role name, p_access text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_function regprocedure;
BEGIN
    PERFORM @extschema@._check_access(p_role, p_access);
    DELETE FROM @extschema@.access_grant AS g
    WHERE g.role_name = p_role AND g.access = p_access;
    FOR v_function IN SELECT f FROM @extschema@._access_functions(p_access) AS f LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I', v_function, p_role);
    END LOOP;
    IF p_access = 'monitor' THEN
        EXECUTE pg_catalog.format('REVOKE SELECT ON %I.metrics FROM %I', '@extschema@', p_role);
    END IF;
    IF p_access = 'admin' THEN
        EXECUTE pg_catalog.format('REVOKE SELECT ON ALL TABLES IN SCHEMA %I FROM %I', '@extschema@', p_role);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM @extschema@.access_grant AS g WHERE g.role_name = p_role) THEN
        EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA %I FROM %I', '@extschema@', p_role);
    END IF;
    PERFORM @extschema@._access_apply(p_role, NULL);
END;
$$;

COMMENT ON FUNCTION @extschema@.revoke_access(name, text) IS
'Take an access set back from a role (what another set it still holds needs stays granted).';

REVOKE ALL ON FUNCTION @extschema@.revoke_access(name, text) FROM PUBLIC;
