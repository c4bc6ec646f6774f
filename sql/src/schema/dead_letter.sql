-- Dead letters: messages that used up their channel's max_attempts
-- (message_fail, or a lock that expired once too often).  Kept by channel
-- name, so they outlive channel_drop; dead_letter_redrive puts them back.
-- attempt_log: one JSON object per failed attempt,
-- {"attempt": n, "at": epoch ms, "error": text}.  after, after_mode: a
-- message that died waiting (a parent dead-lettered), the parents it was
-- waiting for and its mode, which a redrive waits for again.
CREATE TABLE @extschema@.dead_letter (
    id bigint NOT NULL,
    channel text NOT NULL,
    key text,
    content bytea NOT NULL,
    state bytea,
    num_attempts integer NOT NULL,
    created_at bigint NOT NULL,
    dead_at bigint NOT NULL,
    last_error text,
    attempt_log jsonb,
    headers jsonb,
    after bigint[],
    after_mode text,
    CONSTRAINT dead_letter_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.dead_letter', '');

COMMENT ON TABLE @extschema@.dead_letter IS
'Dead letters: messages that used up their channel''s max_attempts, kept by channel name (they outlive channel_drop) until dead_letter_redrive or dead_letter_delete.';

COMMENT ON COLUMN @extschema@.dead_letter.id IS
'The id the dead message had in the queue.';

COMMENT ON COLUMN @extschema@.dead_letter.channel IS
'The name of the dead message''s channel.';

COMMENT ON COLUMN @extschema@.dead_letter.key IS
'The dead message''s deduplication key; NULL: none.';

COMMENT ON COLUMN @extschema@.dead_letter.content IS
'The dead message''s payload.';

COMMENT ON COLUMN @extschema@.dead_letter.state IS
'The state message_defer last saved for the dead message; NULL: none.';

COMMENT ON COLUMN @extschema@.dead_letter.num_attempts IS
'Deliveries the message had; may exceed max_attempts, which counts failures only.';

COMMENT ON COLUMN @extschema@.dead_letter.created_at IS
'When the dead message was created, in epoch milliseconds.';

COMMENT ON COLUMN @extschema@.dead_letter.dead_at IS
'When the message became a dead letter, in epoch milliseconds.';

COMMENT ON COLUMN @extschema@.dead_letter.last_error IS
'The last failure''s error: message_fail''s p_error, or lock expired; NULL when message_fail was given none.';

COMMENT ON COLUMN @extschema@.dead_letter.attempt_log IS
'One JSON object per failed attempt, {"attempt": n, "at": epoch ms, "error": text}.';

COMMENT ON COLUMN @extschema@.dead_letter.headers IS
'The dead message''s headers, as its producer gave them; NULL: none.';

COMMENT ON COLUMN @extschema@.dead_letter.after IS
'The parents the message was waiting for when it died (a parent was dead-lettered), which a redrive waits for again; NULL: none.';

COMMENT ON COLUMN @extschema@.dead_letter.after_mode IS
'What was to release the message (completed or ended), kept for a redrive; NULL: it waited for nothing.';
