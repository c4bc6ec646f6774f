-- Whether a pattern (channel_set of a name ending in '*') was ever set in
-- this database: 0 until the first one, then 1 for good (a dropped last
-- pattern, or one whose transaction rolled back, leaves it at 1: the flag
-- only tells when the lookup can be skipped).  A producer or a completion
-- of a channel without a row looks for its pattern only when it is 1, so
-- a database that never sets a pattern pays no probe of
-- channel_prefix_key (the worker loop: 0.90 to 0.95 x without the flag,
-- bench/results/README.md).
CREATE SEQUENCE @extschema@.channel_pattern_seq AS bigint
MINVALUE 0 MAXVALUE 1 START 0;

-- (Called, so that pg_sequence_last_value reads 0, not NULL.)
SELECT pg_catalog.setval('@extschema@.channel_pattern_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_pattern_seq', '');

COMMENT ON SEQUENCE @extschema@.channel_pattern_seq IS
'Configuration, internal state maintained by channel_set, not to be written by hand: 1 once a pattern (a name ending in *) was set in this database, else 0.';
