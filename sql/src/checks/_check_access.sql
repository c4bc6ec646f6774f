-- Internal: validates the arguments of grant_access and revoke_access: both
-- given (22004), an access set lonnymq knows (producer, consumer, monitor,
-- admin; 22023), a role that exists (42704).  STABLE: it reads pg_roles.
-- Parameters: p_role, the role's name; p_access, the access set's name.
-- Returns: nothing; raises on invalid arguments.
-- Calls: none.
-- Tables: reads nothing of the extension's (pg_catalog.pg_roles only).
-- Locks: none.
CREATE FUNCTION @extschema@._check_access(p_role name, p_access text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_role IS NULL OR p_access IS NULL THEN
        RAISE EXCEPTION 'lonnymq: p_role and p_access must not be NULL'
            USING ERRCODE = '22004';
    END IF;
    IF p_access NOT IN ('producer', 'consumer', 'monitor', 'admin') THEN
        RAISE EXCEPTION 'lonnymq: p_access must be producer, consumer, monitor or admin, got "%"', p_access
            USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role) THEN
        RAISE EXCEPTION 'lonnymq: role "%" does not exist', p_role
            USING ERRCODE = '42704';
    END IF;
END;
$$;

COMMENT ON FUNCTION @extschema@._check_access(name, text) IS
'Internal: raises 22004 for NULL arguments, 22023 for an unknown access set, 42704 for an unknown role.';

REVOKE ALL ON FUNCTION @extschema@._check_access(name, text) FROM PUBLIC;
