-- Dependencies (doc/dependencies.md): one row per parent and dependent
-- ("child"), written by the child's create (_message_edges_link), read and
-- deleted in child order by the parent's end (_message_waits_resolve), at
-- most _release_batch_size of them per call, from a cursor: never from the
-- parent's first edge again, so that the dead entries of the edges already
-- resolved are not walked again under an old snapshot.  bucket: the
-- child's message_wait row the parent's end counts down, -1 (its own
-- count) for a child of 64 parents or fewer.
-- An edge whose child no longer waits (cancelled, dead, its channel
-- dropped) is deleted when its parent ends, changing nothing.
CREATE TABLE @extschema@.message_edge (
    parent_id bigint NOT NULL,
    child_id bigint NOT NULL,
    bucket integer NOT NULL,
    CONSTRAINT message_edge_pkey PRIMARY KEY (parent_id, child_id)
) WITH (
    -- (Every edge is deleted when its parent ends: vacuumed as message is.)
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.message_edge', '');

COMMENT ON TABLE @extschema@.message_edge IS
'Dependencies: a message (child_id) waits for another (parent_id) to end; deleted when the parent ends.';

COMMENT ON COLUMN @extschema@.message_edge.parent_id IS
'The message waited for.';

COMMENT ON COLUMN @extschema@.message_edge.child_id IS
'The message that waits.';

COMMENT ON COLUMN @extschema@.message_edge.bucket IS
'The child''s message_wait row the parent''s end counts down: -1, its own count; 0 and up, a bucket.';
