-- Messages that become deliverable at a time: scheduled ones (a future
-- dequeue_at, a retry's backoff, a defer) and locked ones (their lock's
-- expiry), by dequeue_at.  A dequeue probes it from the due mark and
-- promotes what is due: a scheduled message becomes ready, an expired lock
-- ready again (recovery) or a dead letter.  The range below the due mark
-- holds only entries of messages that left it.
--
-- Keyed by greatest(dequeue_at, created_at): a message of a channel with
-- limits is created waiting here, due at once, so that a consumer admits it
-- (producers never lock a limited channel's row); its dequeue_at may be
-- its transaction's start, older than the due mark, but created_at is the
-- producer's clock, read after it entered the epoch, which the due mark
-- never passes.  For every other entry dequeue_at is the later of the two.
CREATE INDEX message_due_ix
ON @extschema@.message ((greatest(dequeue_at, created_at)), id)
WHERE position IS NULL AND NOT is_held;
