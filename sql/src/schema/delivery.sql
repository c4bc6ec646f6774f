-- A delivered message: the rows of message_dequeue and
-- message_complete_dequeue.  A named type, so that PL/pgSQL callers can
-- declare a variable of it and both functions declare one result.
CREATE TYPE @extschema@.delivery AS (
    id bigint,
    channel text,
    content bytea,
    state bytea,
    num_attempts integer,
    dequeue_at bigint,
    is_recovered boolean,
    headers jsonb
);

COMMENT ON TYPE @extschema@.delivery IS
'A delivered message, as message_dequeue and message_complete_dequeue return it.';
COMMENT ON COLUMN @extschema@.delivery.id IS
'The message''s id.';
COMMENT ON COLUMN @extschema@.delivery.channel IS
'The name of its channel.';
COMMENT ON COLUMN @extschema@.delivery.content IS
'As given to message_create.';
COMMENT ON COLUMN @extschema@.delivery.state IS
'As last saved by message_defer(..., p_state); NULL if never.';
COMMENT ON COLUMN @extschema@.delivery.num_attempts IS
'Deliveries so far, this one included: the fencing token for complete, defer, fail and heartbeat.';
COMMENT ON COLUMN @extschema@.delivery.dequeue_at IS
'Its dequeue_at before this delivery, in epoch ms: its scheduled time, or, when recovered, when the lapsed lock expired.';
COMMENT ON COLUMN @extschema@.delivery.is_recovered IS
'True when it was still locked by an earlier delivery whose lock had expired.';
COMMENT ON COLUMN @extschema@.delivery.headers IS
'As given to message_create (a JSON object: doc/headers.md); NULL if none.';
