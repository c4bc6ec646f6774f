-- Whether a channel's row was ever made in this database (_channel_lock:
-- channel_set, channel_pause, a pattern's application; a pattern's
-- follower gets its row only after its pattern's): 0 until the first one,
-- then 1 for good (a dropped last row, or one whose transaction rolled
-- back, leaves it at 1: the flag only tells when the probes can be
-- skipped).  Set before the row is inserted, so that a statement that sees
-- a row sees the flag.  A completion follows a message's channel (its row
-- lock, its history, its pending count) only when it is 1: with no row
-- there is no limit, no admission and no history to follow, and the
-- probes, out of line (_channel_rows_lock, _channel_has_row), are neither
-- run nor prepared (two channel probes in the completion's statement, 53k
-- instructions of a worker loop's 1,650k: doc/dequeue-design.md).
CREATE SEQUENCE @extschema@.channel_row_seq AS bigint
MINVALUE 0 MAXVALUE 1 START 0;

-- (Called, so that pg_sequence_last_value reads 0, not NULL.)
SELECT pg_catalog.setval('@extschema@.channel_row_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_row_seq', '');

COMMENT ON SEQUENCE @extschema@.channel_row_seq IS
'Configuration, internal state maintained by channel_set and channel_pause, not to be written by hand: 1 once a channel''s row was made in this database, else 0.';
