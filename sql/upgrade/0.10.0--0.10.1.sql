-- Schema changes from 0.10.0 to 0.10.1 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.10.0
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.10.0--0.10.1.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- message_dequeue and message_complete_dequeue return the named type
-- delivery (a function's result type cannot be replaced: they are created
-- again below, and their access grants re-applied); their internal row
-- type is now called _taken.
DROP FUNCTION @extschema@.message_dequeue(bigint, integer, text);
DROP FUNCTION @extschema@.message_complete_dequeue(bigint[], integer[], bigint, integer, text);
DROP TYPE @extschema@._delivery;
-- @include sql/src/schema/070_type_taken.sql
-- @include sql/src/schema/071_type_delivery.sql
