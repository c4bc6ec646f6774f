-- Message ids: FIFO tie-breaker within a channel, and the handle workers use.
CREATE SEQUENCE @extschema@.message_id_seq AS bigint;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message_id_seq', '');

COMMENT ON SEQUENCE @extschema@.message_id_seq IS
'Message ids (message.id): the FIFO tie-breaker within a channel, and the handle workers use.';
