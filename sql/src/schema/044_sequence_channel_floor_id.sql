-- Ids of channel floor rows: their order is the order of the writes.
CREATE SEQUENCE @extschema@.channel_floor_id_seq AS bigint;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_floor_id_seq', '');

COMMENT ON SEQUENCE @extschema@.channel_floor_id_seq IS
'Ids of channel floor rows (channel_floor.id): their order is the order of the writes.';
