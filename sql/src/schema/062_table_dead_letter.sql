-- Dead letters: messages that used up their channel's max_attempts
-- (message_fail, or a lock that expired once too often).  Kept by channel
-- name, so they outlive channel_drop; dead_letter_redrive puts them back.
-- attempt_log: one JSON object per failed attempt,
-- {"attempt": n, "at": epoch ms, "error": text}.
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
    CONSTRAINT dead_letter_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.dead_letter', '');
