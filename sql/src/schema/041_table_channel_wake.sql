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

COMMENT ON TABLE @extschema@.channel_wake IS
'Wake-ups left by producers and message_defer for channels a consumer found with nothing deliverable before channel.wait_at, internal state maintained by the queue functions, not to be written by hand.';

COMMENT ON COLUMN @extschema@.channel_wake.id IS
'The wake-up''s id, from channel_wake_id_seq.';

COMMENT ON COLUMN @extschema@.channel_wake.channel_id IS
'The channel to wake (channel.id).';

COMMENT ON COLUMN @extschema@.channel_wake.wake_at IS
'Epoch ms when the message that left the wake-up is deliverable (never before it was put in the channel): when the channel may rejoin the rotation.';
