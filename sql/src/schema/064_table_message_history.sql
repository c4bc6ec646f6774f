-- Completed messages of channels with retain_history, written by the
-- complete that removed them from message.  Kept by channel name (they
-- outlive channel_drop) until history_prune removes them.
CREATE TABLE @extschema@.message_history (
    id bigint NOT NULL,
    channel text NOT NULL,
    key text,
    content bytea NOT NULL,
    state bytea,
    num_attempts integer NOT NULL,
    created_at bigint NOT NULL,
    completed_at bigint NOT NULL,
    CONSTRAINT message_history_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message_history', '');
