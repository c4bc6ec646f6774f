-- Tie-breaker for the round-robin rotation: two channels whose turn falls in
-- the same millisecond are served in the order their turns were assigned.
-- CACHE 1 keeps the order global across sessions.
CREATE SEQUENCE @extschema@.channel_turn_seq AS bigint CACHE 1;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_turn_seq', '');

COMMENT ON SEQUENCE @extschema@.channel_turn_seq IS
'Rotation tie-breaker (channel.turn) for channels whose turns fall in the same millisecond; CACHE 1 keeps its order global across sessions.';
