-- Deduplication keys (message_create's p_key).  A row claims (channel, key)
-- for one message: while the message exists expires_at is NULL; when it is
-- completed or dead-lettered on a channel with a dedup window, expires_at is
-- set to the end of the window (without a window, or on cancel, the row is
-- deleted).  A producer presenting a claimed, unexpired key gets the
-- claiming message's id back and stores nothing.  The primary key is the
-- only lookup: one probe per keyed create.
CREATE TABLE @extschema@.message_key (
    channel_id bigint NOT NULL,
    key text NOT NULL,
    message_id bigint NOT NULL,
    expires_at bigint,
    CONSTRAINT message_key_pkey PRIMARY KEY (channel_id, key)
) WITH (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message_key', '');
