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
-- signatures (the users' direct grants on the old ones are carried to the
-- new ones: tools/build_upgrade.py).
DROP FUNCTION @extschema@.message_create(text, bytea, bigint, text);
DROP FUNCTION @extschema@.message_create_batch(text, bytea[], bigint[], text[]);
DROP FUNCTION @extschema@.message_publish(text, bytea, bigint, text, boolean);
DROP FUNCTION @extschema@.message_publish_batch(text, bytea[], bigint[], text[], boolean);
DROP FUNCTION @extschema@._check_batch(bytea[], bigint[], text[]);
