-- Schema changes from 0.4.0 to 0.5.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and re-applies the recorded
-- access grants, giving sql/lonnymq--0.4.0--0.5.0.sql.  Test:
-- test/python/test_upgrade.py (the upgraded schema equals a fresh one).

-- No table or index changes: 0.5.0 changes functions only.
