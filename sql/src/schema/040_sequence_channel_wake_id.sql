-- Ids of channel wake-ups.
CREATE SEQUENCE @extschema@.channel_wake_id_seq AS bigint;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_wake_id_seq', '');

COMMENT ON SEQUENCE @extschema@.channel_wake_id_seq IS
'Ids of channel wake-ups (channel_wake.id).';
