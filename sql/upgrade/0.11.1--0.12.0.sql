-- Schema changes from 0.11.1 to 0.12.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.11.1
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.11.1--0.12.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- Ordered channels (channel_set p_ordered).
ALTER TABLE @extschema@.channel ADD COLUMN is_ordered boolean NOT NULL DEFAULT FALSE;
ALTER TABLE @extschema@.channel ADD CONSTRAINT channel_ordered_check CHECK (NOT is_ordered OR max_concurrency = 1);
DROP FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint, boolean,
    boolean, text
);
