-- Internal: a message message_complete_dequeue took, kept until the end of
-- the call, which returns them in rotation order (by visit, round-robin).
CREATE TYPE @extschema@._taken AS (
    -- The position of its channel among the call's visits.
    visit integer,
    id bigint,
    content bytea,
    state bytea,
    num_attempts integer,
    -- Its dequeue_at before it was taken (the lock's expiry when recovered).
    dequeue_at bigint,
    is_recovered boolean
);

COMMENT ON TYPE @extschema@._taken IS
'Internal: a message taken by message_complete_dequeue, returned at the end of the call.';
