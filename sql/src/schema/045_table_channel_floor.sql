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

COMMENT ON TABLE @extschema@.channel_floor IS
'Insert-only log of writes of each channel''s floor, where a dequeue starts its walk of the channel''s messages; internal state maintained by the queue functions, not to be written by hand.';

COMMENT ON COLUMN @extschema@.channel_floor.id IS
'The write''s id, from channel_floor_id_seq: their order is the order of the writes.';

COMMENT ON COLUMN @extschema@.channel_floor.channel_id IS
'The channel (channel.id).';

COMMENT ON COLUMN @extschema@.channel_floor.floor_at IS
'A floor in dequeue_at terms (epoch ms), internal state maintained by the queue functions, not to be written by hand; the floor is the lowest floor_at among the channel''s rows from its newest raise on.';

COMMENT ON COLUMN @extschema@.channel_floor.is_raise IS
'TRUE: a consumer''s raise (it deletes the rows it supersedes); FALSE: a producer''s lowering, below the floor; internal state maintained by the queue functions, not to be written by hand.';
