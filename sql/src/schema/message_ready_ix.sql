-- The round order: ready messages by position, ties (a shared place) in
-- (dequeue_at, id) order.  The take is the first entries from the position
-- mark, FOR UPDATE SKIP LOCKED; a batch of N is the first N places, N
-- deliveries shared round-robin among the channels at the front.
CREATE INDEX message_ready_ix
ON @extschema@.message (position, dequeue_at, id)
WHERE position IS NOT NULL;
