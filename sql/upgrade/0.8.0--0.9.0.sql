-- Schema changes from 0.8.0 to 0.9.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and the entry points'
-- settings, and re-applies the recorded access grants, giving
-- sql/lonnymq--0.8.0--0.9.0.sql.  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- message.locked_by: the role holding the message's lock.  NULL for the
-- locks taken before the update: any role may settle those, as in 0.8.0.
ALTER TABLE @extschema@.message ADD COLUMN locked_by pg_catalog.regrole;

-- channel.notify_payload: what a channel's notifications carry (its name, as
-- before, its id, or nothing); channel_set gets p_notify_payload.
ALTER TABLE @extschema@.channel ADD COLUMN notify_payload text NOT NULL DEFAULT 'name';
ALTER TABLE @extschema@.channel ADD CONSTRAINT channel_notify_payload_check CHECK (
    notify_payload IN ('name', 'id', 'none')
);
DROP FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean
);
