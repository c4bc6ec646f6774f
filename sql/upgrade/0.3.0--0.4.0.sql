-- Schema changes from 0.3.0 to 0.4.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and re-applies the recorded
-- access grants, giving sql/lonnymq--0.3.0--0.4.0.sql.  Test:
-- test/python/test_upgrade.py (the upgraded schema equals a fresh one).

-- No table or index changes: 0.4.0 changes functions only.
