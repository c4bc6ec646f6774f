-- Internal: the role a call of lonnymq's entry points acts as: the role set
-- with SET ROLE, else the session's login role.  Inside a SECURITY DEFINER
-- function current_user is the extension's owner; the role setting and
-- session_user are not changed by it.  A SQL function without sub-selects,
-- so that the planner inlines it into the statement that uses it.
-- Parameters: none.
-- Returns: the role as a regrole.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._caller_role()
RETURNS pg_catalog.regrole
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.quote_ident(
        COALESCE(NULLIF(pg_catalog.current_setting('role'), 'none'), SESSION_USER)
    )::pg_catalog.regrole
$$;

COMMENT ON FUNCTION @extschema@._caller_role() IS
'Internal: the role the caller acts as (SET ROLE, else the login role), which holds the locks it takes.';

REVOKE ALL ON FUNCTION @extschema@._caller_role() FROM PUBLIC;
