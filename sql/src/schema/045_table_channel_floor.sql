-- Where a dequeue starts its walk of a channel's messages (in dequeue_at):
-- no message of the channel sorts below its floor.  The floor is the lowest
-- floor_at among the channel's rows from its newest raise on
-- (_channel_scan_from); no raise yet: the beginning.
--
-- An insert-only log, read newest row first, rather than a column of the
-- channel row: the floor follows the head of the channel closely (raised
-- up to 50 times a second), and under a long-open snapshot every rewrite of
-- a row leaves a version that every lookup of that row walks, while the
-- rows a raise deletes lie behind the newest one and are never visited.
--   * is_raise: written by a consumer that holds the channel guard
--     exclusively (no producer in flight) after a fresh probe of the
--     channel's first message; it deletes the rows it supersedes
--     (_channel_place);
--   * otherwise a lowering: a producer (create, defer, fail, redrive) that
--     put a message below the floor, or may have (it could not read the
--     floor in its snapshot), inserts its dequeue_at (_channel_arrival).
--     Inserting never conflicts with anyone; the minimum makes concurrent
--     lowerings safe in any order.
CREATE TABLE @extschema@.channel_floor (
    id bigint NOT NULL DEFAULT pg_catalog.nextval('@extschema@.channel_floor_id_seq'),
    channel_id bigint NOT NULL,
    floor_at bigint NOT NULL,
    is_raise boolean NOT NULL,
    CONSTRAINT channel_floor_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 1000
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_floor', '');
