-- Dependencies (doc/dependencies.md): the counts of a message that waits for
-- its parents.  Bucket -1 is its own count: of its parents still to end
-- (64 or fewer), or of its buckets still above zero; it keeps the parents
-- it was created waiting for (after) and what releases it (after_mode),
-- which a dead letter keeps for a redrive.  With more than 64 parents they
-- are split into ceil(N / 64) buckets, 0 and up, by their ordinal (in id
-- order) modulo that number (_message_edges_link): a parent's end counts
-- its bucket down, and a bucket that reaches zero is deleted and counts
-- the message's own count down.  So no row is written more than 64 times
-- by a child's parents (an old snapshot makes a row's updates walk its
-- versions: a ceiling), and workers that complete neighbouring parents
-- (parents end roughly in id order) write different rows
-- (doc/workflows-design.md: with one counter, 8 workers spent 68 % of their
-- time waiting on its lock).  Kept apart from message, so that a message
-- that waits for nothing carries no column for it.
CREATE TABLE @extschema@.message_wait (
    child_id bigint NOT NULL,
    bucket integer NOT NULL,
    num_waiting integer NOT NULL,
    after bigint[],
    after_mode text,
    CONSTRAINT message_wait_pkey PRIMARY KEY (child_id, bucket)
) WITH (
    -- (Each row is updated by up to 64 parents, then deleted.)
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message_wait', '');

COMMENT ON TABLE @extschema@.message_wait IS
'Dependencies: the counts of a message waiting for its parents: its own (bucket -1), and one per bucket of its parents beyond 64.';

COMMENT ON COLUMN @extschema@.message_wait.child_id IS
'The waiting message.';

COMMENT ON COLUMN @extschema@.message_wait.bucket IS
'-1: the message''s own count; 0 and up: a bucket, the parents whose ordinal modulo the number of buckets is this.';

COMMENT ON COLUMN @extschema@.message_wait.num_waiting IS
'Bucket -1: the parents (64 or fewer) or the buckets still to end; a bucket: its parents still to end.';

COMMENT ON COLUMN @extschema@.message_wait.after IS
'Bucket -1: the parents the message was created waiting for (those then in the queue); NULL on a bucket.';

COMMENT ON COLUMN @extschema@.message_wait.after_mode IS
'Bucket -1: what releases the message, completed (a dead or cancelled parent ends it too) or ended; NULL on a bucket.';
