-- Marks left by producers (and by message_defer, message_fail and
-- dead_letter_redrive) that put a message below its channel's floor_at, or
-- that read the channel row from a snapshot older than their statement
-- (REPEATABLE READ, SERIALIZABLE), where the floor they saw may be stale.
-- While a channel has a mark, batch dequeues walk its messages from the
-- beginning; the next floor raise (_channel_floor_raise, with the channel
-- guard held exclusively, so no producer is in flight) takes every mark
-- into account and deletes them.  Inserting a row never conflicts with
-- anyone: producers never write the channel row.
CREATE TABLE @extschema@.channel_floor_mark (
    channel_id bigint NOT NULL,
    marked_at bigint NOT NULL
) WITH (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 1000
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_floor_mark', '');
