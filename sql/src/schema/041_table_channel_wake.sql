-- Wake-ups left by producers (and by message_defer) for channels that a
-- consumer found with nothing deliverable before channel.wait_at.  Inserting
-- a row never conflicts with anyone, so a producer never writes the channel
-- row and never waits for a consumer; dequeue applies due wake-ups first.
CREATE TABLE @extschema@.channel_wake (
    id bigint NOT NULL DEFAULT pg_catalog.nextval('@extschema@.channel_wake_id_seq'),
    channel_id bigint NOT NULL,
    wake_at bigint NOT NULL,
    CONSTRAINT channel_wake_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 1000
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_wake', '');
