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
    headers jsonb,
    CONSTRAINT message_history_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message_history', '');

COMMENT ON TABLE @extschema@.message_history IS
'Completed messages of channels with retain_history, copied by the completing transaction; kept by channel name (they outlive channel_drop) until history_prune.';

COMMENT ON COLUMN @extschema@.message_history.id IS
'The id the completed message had in the queue.';

COMMENT ON COLUMN @extschema@.message_history.channel IS
'The name of the completed message''s channel.';

COMMENT ON COLUMN @extschema@.message_history.key IS
'The completed message''s deduplication key; NULL: none.';

COMMENT ON COLUMN @extschema@.message_history.content IS
'The completed message''s payload.';

COMMENT ON COLUMN @extschema@.message_history.state IS
'The state message_defer last saved for the completed message; NULL: none.';

COMMENT ON COLUMN @extschema@.message_history.num_attempts IS
'Deliveries the message had.';

COMMENT ON COLUMN @extschema@.message_history.created_at IS
'When the completed message was created, in epoch milliseconds.';

COMMENT ON COLUMN @extschema@.message_history.completed_at IS
'When the message was completed, in epoch milliseconds.';

COMMENT ON COLUMN @extschema@.message_history.headers IS
'The completed message''s headers, as its producer gave them; NULL: none.';
