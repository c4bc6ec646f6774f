-- Internal: a turn of the round order that a dequeue holds, with the message
-- it delivers and what the delivery reports of it (its dequeue_at and
-- whether it was locked before the take): message_complete_dequeue's
-- turns, and what _message_turns_resolve returns when an early message
-- passes a turn's holder.
CREATE TYPE @extschema@._turn AS (
    id bigint,
    channel_id bigint,
    dequeue_at bigint,
    is_locked boolean,
    position bigint
);

COMMENT ON TYPE @extschema@._turn IS
'Internal: a turn of the round order held by a dequeue, and the message it delivers.';
