-- Schema changes from 0.12.0 to 0.13.0 (hand-written).  make appends the
-- functions of sql/src/ and the comments of sql/src/schema/ that 0.12.0
-- does not already have, the entry points' settings, and the recorded
-- access grants again, giving sql/lonnymq--0.12.0--0.13.0.sql
-- (tools/build_upgrade.py).  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- Deduplication keys compare byte by byte (COLLATE "C"): equality is the
-- same under every deterministic collation, and the claim's index no
-- longer sorts by the database's locale.  Rebuilds message_key_pkey; the
-- table is not rewritten.
ALTER TABLE @extschema@.message_key ALTER COLUMN key TYPE text COLLATE "C";
