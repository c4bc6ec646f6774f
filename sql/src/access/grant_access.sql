-- The privilege model in one statement: give a role one of the access sets
-- (producer, consumer, monitor, admin; _access_functions lists them), recorded
-- in access_grant so that upgrades extend it (_access_apply).  Runs with the
-- caller's rights: only a role that may grant on lonnymq's objects (their
-- owner, a superuser) can use it.
-- Parameters: p_role, an existing role; p_access, producer, consumer, monitor
--   or admin.
-- Returns: nothing.  Errors: _check_access's.
-- Calls: _check_access, _access_apply.
-- Tables: writes access_grant (inserts; a grant recorded already is left as it
--   is).  (access_grant read through _access_apply.)
-- Locks: the access_grant row it inserts.
CREATE FUNCTION @extschema@.grant_access(p_role name, p_access text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@._check_access(p_role, p_access);
    INSERT INTO @extschema@.access_grant (role_name, access)
    VALUES (p_role, p_access)
    ON CONFLICT DO NOTHING;
    PERFORM @extschema@._access_apply(p_role, p_access);
END;
$$;

COMMENT ON FUNCTION @extschema@.grant_access(name, text) IS
'Give a role an access set: producer (message_create), consumer (dequeue, complete, defer, heartbeat), monitor (metrics_text, the view metrics) or admin (everything, channel settings, SELECT on the tables). Needs the right to grant on lonnymq''s objects.';

REVOKE ALL ON FUNCTION @extschema@.grant_access(name, text) FROM PUBLIC;
