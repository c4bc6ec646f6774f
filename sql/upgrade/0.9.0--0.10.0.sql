-- Schema changes from 0.9.0 to 0.10.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and the entry points'
-- settings, and re-applies the recorded access grants, giving
-- sql/lonnymq--0.9.0--0.10.0.sql.  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- _channel_release takes a batch's channels at once.
DROP FUNCTION @extschema@._channel_release(bigint, integer, boolean, bigint);
