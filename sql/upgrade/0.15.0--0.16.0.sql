-- Schema changes from 0.15.0 to 0.16.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.15.0
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.15.0--0.16.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- Headers (doc/headers.md): a JSON object per message, given by its
-- producer, returned with every delivery, carried into the dead letters and
-- the history.  Added last, where a fresh install has them (NULL: no table
-- is rewritten).
ALTER TABLE @extschema@.message ADD COLUMN headers jsonb;
ALTER TABLE @extschema@.dead_letter ADD COLUMN headers jsonb;
ALTER TABLE @extschema@.message_history ADD COLUMN headers jsonb;
ALTER TYPE @extschema@.delivery ADD ATTRIBUTE headers jsonb;

-- The producer calls take the headers as their last parameter: new
-- signatures.  The EXECUTE grants a user gave on the old ones directly (not
-- through grant_access, whose grants are applied again below) are carried to
-- the new ones after the functions are created ("@after functions"), kept
-- meanwhile in a setting of this transaction: a table made here would
-- become a member of the extension.
SELECT pg_catalog.set_config(
    'lonnymq.upgrade_grants',
    COALESCE(
        (
            SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(s.new_signature, x.grantee::regrole::text, x.is_grantable))
            FROM (
                VALUES
                ('message_create(text, bytea, bigint, text)', 'message_create(text, bytea, bigint, text, jsonb)'),
                (
                    'message_create_batch(text, bytea[], bigint[], text[])',
                    'message_create_batch(text, bytea[], bigint[], text[], jsonb[])'
                ),
                (
                    'message_publish(text, bytea, bigint, text, boolean)',
                    'message_publish(text, bytea, bigint, text, boolean, jsonb)'
                ),
                (
                    'message_publish_batch(text, bytea[], bigint[], text[], boolean)',
                    'message_publish_batch(text, bytea[], bigint[], text[], boolean, jsonb[])'
                )
            ) AS s (old_signature, new_signature)
            INNER JOIN pg_catalog.pg_proc AS p ON p.oid = pg_catalog.to_regprocedure('@extschema@.' || s.old_signature)
            CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) AS x
            WHERE x.privilege_type = 'EXECUTE' AND x.grantee <> 0 AND x.grantee <> p.proowner
        )::text,
        '[]'
    ),
    TRUE
);
DROP FUNCTION @extschema@.message_create(text, bytea, bigint, text);
DROP FUNCTION @extschema@.message_create_batch(text, bytea[], bigint[], text[]);
DROP FUNCTION @extschema@.message_publish(text, bytea, bigint, text, boolean);
DROP FUNCTION @extschema@.message_publish_batch(text, bytea[], bigint[], text[], boolean);
DROP FUNCTION @extschema@._check_batch(bytea[], bigint[], text[]);

-- @after functions
DO $lonnymq_grants$
DECLARE
    v_grant jsonb;
BEGIN
    FOR v_grant IN
        SELECT g.value
        FROM pg_catalog.jsonb_array_elements(pg_catalog.current_setting('lonnymq.upgrade_grants')::jsonb) AS g
    LOOP
        EXECUTE pg_catalog.format(
            'GRANT EXECUTE ON FUNCTION @extschema@.%s TO %s%s',
            v_grant ->> 0, v_grant ->> 1, CASE WHEN (v_grant ->> 2)::boolean THEN ' WITH GRANT OPTION' ELSE '' END
        );
    END LOOP;
END;
$lonnymq_grants$;
