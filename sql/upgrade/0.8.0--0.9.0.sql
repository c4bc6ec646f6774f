-- Schema changes from 0.8.0 to 0.9.0 (hand-written).  make appends every
-- function of sql/src/ (as CREATE OR REPLACE) and the entry points'
-- settings, and re-applies the recorded access grants, giving
-- sql/lonnymq--0.8.0--0.9.0.sql.  Test: test/python/test_upgrade.py (the
-- upgraded schema equals a fresh one).

-- message.locked_by: the role holding the message's lock.  NULL for the
-- locks taken before the update: any role may settle those, as in 0.8.0.
ALTER TABLE @extschema@.message ADD COLUMN locked_by pg_catalog.regrole;

-- channel.notify_payload: what a channel's notifications carry (NULL: its
-- name, as before); channel_set gets p_notify_payload.
ALTER TABLE @extschema@.channel ADD COLUMN notify_payload text;
DROP FUNCTION @extschema@.channel_set(
    text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint,
    boolean, boolean
);

-- message.num_failures: failed deliveries (message_fail, expired locks),
-- which max_attempts counts from 0.9.0 on, not deliveries (a defer is not a
-- failure).  Each failure since 0.2.0 left an entry in attempt_log; a
-- redriven message kept the entries of its earlier life, so they are
-- counted only up to its deliveries since (less the current one of a
-- locked message, which has not failed yet).  What a fresh install would
-- hold for the same history (test/python/test_upgrade.py).
ALTER TABLE @extschema@.message ADD COLUMN num_failures integer NOT NULL DEFAULT 0;
UPDATE @extschema@.message AS m
SET num_failures = LEAST(
    pg_catalog.jsonb_array_length(m.attempt_log), m.num_attempts - CASE WHEN m.is_locked THEN 1 ELSE 0 END
)
WHERE m.attempt_log IS NOT NULL;
DROP FUNCTION @extschema@._message_head(bigint, bigint, bigint, integer, boolean);
