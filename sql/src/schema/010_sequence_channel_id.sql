-- Channel ids. Registered with pg_extension_config_dump so that pg_dump
-- carries the sequence position and restored ids never collide.
CREATE SEQUENCE @extschema@.channel_id_seq AS bigint;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_id_seq', '');

COMMENT ON SEQUENCE @extschema@.channel_id_seq IS
'Channel ids (channel.id); registered with pg_extension_config_dump so that restored ids never collide.';
