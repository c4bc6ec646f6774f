-- Dependencies (doc/dependencies.md): the counters of a child of more than
-- 64 parents.  Its parents are split into ceil(N / 64) buckets by their
-- ordinal modulo that number (_message_edges_link); a parent's end counts
-- its bucket down, and a bucket that reaches zero is deleted and counts the
-- child's own num_waiting down.  So no row is written more than 64 times by
-- a child's parents (an old snapshot makes a row's updates walk its
-- versions: a ceiling), and workers that complete neighbouring parents
-- (parents end roughly in id order) write different rows (doc/
-- workflows-design.md: with one counter 8 workers spent 68 % of their time
-- waiting on its lock).
CREATE TABLE @extschema@.message_wait_bucket (
    child_id bigint NOT NULL,
    bucket integer NOT NULL,
    num_waiting integer NOT NULL,
    CONSTRAINT message_wait_bucket_pkey PRIMARY KEY (child_id, bucket)
) WITH (
    -- (Each row is updated by up to 64 parents, then deleted.)
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message_wait_bucket', '');

COMMENT ON TABLE @extschema@.message_wait_bucket IS
'Dependencies: the counters of a message waiting for more than 64 parents, one per bucket of its parents.';

COMMENT ON COLUMN @extschema@.message_wait_bucket.child_id IS
'The waiting message.';

COMMENT ON COLUMN @extschema@.message_wait_bucket.bucket IS
'The bucket: the parents whose ordinal modulo the number of buckets is this.';

COMMENT ON COLUMN @extschema@.message_wait_bucket.num_waiting IS
'The bucket''s parents still to end.';
