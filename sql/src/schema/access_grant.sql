-- Who was given which set of lonnymq's functions (grant_access).  Kept so
-- that an upgrade that adds functions to a set can extend the grants
-- (_access_apply), and carried by pg_dump like the queue itself.
CREATE TABLE @extschema@.access_grant (
    role_name name NOT NULL,
    access text NOT NULL,
    CONSTRAINT access_grant_pkey PRIMARY KEY (role_name, access),
    CONSTRAINT access_grant_access_check CHECK (
        access IN ('producer', 'consumer', 'monitor', 'admin')
    )
) WITH (
    autovacuum_vacuum_threshold = 50
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.access_grant', '');

COMMENT ON TABLE @extschema@.access_grant IS
'Which access set grant_access gave to which role, so that an upgrade that adds functions to a set extends the grants, and pg_dump carries them.';

COMMENT ON COLUMN @extschema@.access_grant.role_name IS
'The role given the set.';

COMMENT ON COLUMN @extschema@.access_grant.access IS
'The access set: producer, consumer or admin.';
