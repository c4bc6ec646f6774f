-- Internal: the functions each access set grants.
--   producer: create messages (one or a batch), publish them to a topic
--             (one or a batch), list a routing key's channels and follow a
--             message's status (message_status);
--   consumer: dequeue, complete (one or a batch), defer, heartbeat, fail;
--   monitor:  a message's status (message_status), the metrics
--             (metrics_text(), and SELECT on the view metrics,
--             which calls _metrics: PostgreSQL checks a view's functions
--             against the view's reader, so the set grants it too);
--   admin:    everything above, plus topic bindings, channel settings,
--             pause, resume and drops, cancel, dead-letter redrive and
--             delete, history pruning, schedules, tick, channel_stats, and
--             SELECT on lonnymq's tables and views (to inspect the queue,
--             its dead letters and history, channel_stats).
-- to_epoch is in every set.  The SELECT grants are _access_apply's.  The
-- functions are named by their signatures as text, cast to regprocedure: none
-- is called.
-- Parameters: p_access, the set: producer, consumer, monitor or admin.
-- Returns: the set's functions (none for another name).
-- Calls: none (the sets' functions are named, not called).
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._access_functions(p_access text)
RETURNS SETOF regprocedure
LANGUAGE sql IMMUTABLE
AS $$
    SELECT f.fn::regprocedure
    FROM (
        VALUES
        ('producer', '@extschema@.to_epoch(timestamptz)'),
        ('producer', '@extschema@.message_create(text, bytea, bigint, text, jsonb, bigint[], text)'),
        ('producer', '@extschema@.message_create_batch(text, bytea[], bigint[], text[], jsonb[], bigint[], text)'),
        ('producer', '@extschema@.message_publish(text, bytea, bigint, text, boolean, jsonb, bigint[], text)'),
        ('producer', '@extschema@.message_publish_batch(text, bytea[], bigint[], text[], boolean, jsonb[], bigint[], text)'),
        ('producer', '@extschema@.topic_routes(text)'),
        ('producer', '@extschema@.message_status(bigint)'),
        ('consumer', '@extschema@.to_epoch(timestamptz)'),
        ('consumer', '@extschema@.message_dequeue(bigint, integer, text)'),
        ('consumer', '@extschema@.message_complete_dequeue(bigint[], integer[], bigint, integer, text)'),
        ('consumer', '@extschema@.message_complete(bigint, integer)'),
        ('consumer', '@extschema@.message_complete_batch(bigint[], integer[])'),
        ('consumer', '@extschema@.message_defer(bigint, integer, bigint, bytea)'),
        ('consumer', '@extschema@.message_heartbeat(bigint, integer, bigint)'),
        ('consumer', '@extschema@.message_fail(bigint, integer, text)'),
        ('admin', '@extschema@.to_epoch(timestamptz)'),
        ('admin', '@extschema@.message_create(text, bytea, bigint, text, jsonb, bigint[], text)'),
        ('admin', '@extschema@.message_create_batch(text, bytea[], bigint[], text[], jsonb[], bigint[], text)'),
        ('admin', '@extschema@.message_publish(text, bytea, bigint, text, boolean, jsonb, bigint[], text)'),
        ('admin', '@extschema@.message_publish_batch(text, bytea[], bigint[], text[], boolean, jsonb[], bigint[], text)'),
        ('admin', '@extschema@.topic_routes(text)'),
        ('admin', '@extschema@.topic_bind(text, text)'),
        ('admin', '@extschema@.topic_unbind(text, text)'),
        ('admin', '@extschema@.message_dequeue(bigint, integer, text)'),
        ('admin', '@extschema@.message_complete_dequeue(bigint[], integer[], bigint, integer, text)'),
        ('admin', '@extschema@.message_complete(bigint, integer)'),
        ('admin', '@extschema@.message_complete_batch(bigint[], integer[])'),
        ('admin', '@extschema@.message_defer(bigint, integer, bigint, bytea)'),
        ('admin', '@extschema@.message_heartbeat(bigint, integer, bigint)'),
        ('admin', '@extschema@.message_fail(bigint, integer, text)'),
        ('admin', '@extschema@.channel_set(text, integer, integer, bigint, integer, bigint, double precision, bigint, double precision, bigint, boolean, boolean, text, boolean)'),
        ('admin', '@extschema@.channel_drop(text, boolean)'),
        ('admin', '@extschema@.channel_pause(text)'),
        ('admin', '@extschema@.channel_resume(text)'),
        ('admin', '@extschema@.message_cancel(bigint)'),
        ('admin', '@extschema@.dead_letter_redrive(text, bigint[])'),
        ('admin', '@extschema@.dead_letter_delete(text, bigint[], boolean)'),
        ('admin', '@extschema@.history_prune(bigint)'),
        ('admin', '@extschema@.schedule_set(text, text, bytea, bigint, bigint)'),
        ('admin', '@extschema@.schedule_drop(text)'),
        ('admin', '@extschema@.tick()'),
        ('admin', '@extschema@.channel_stats(text)'),
        ('admin', '@extschema@.message_status(bigint)'),
        ('monitor', '@extschema@.to_epoch(timestamptz)'),
        ('monitor', '@extschema@.metrics_text()'),
        ('monitor', '@extschema@.message_status(bigint)'),
        ('monitor', '@extschema@._metrics()'),
        ('admin', '@extschema@.metrics_text()'),
        ('admin', '@extschema@._metrics()')
    ) AS f (access, fn)
    WHERE f.access = p_access
$$;

COMMENT ON FUNCTION @extschema@._access_functions(text) IS
'Internal: the functions an access set (producer, consumer, monitor, admin) grants EXECUTE on.';

REVOKE ALL ON FUNCTION @extschema@._access_functions(text) FROM PUBLIC;
