-- Internal: the functions each access set grants.
--   producer: create messages;
--   consumer: dequeue, complete, defer, heartbeat;
--   admin:    everything above, plus channel settings and drops, and SELECT
--             on lonnymq's tables (to inspect the queue).
-- to_epoch is in every set.
CREATE FUNCTION @extschema@._access_functions(p_access text)
RETURNS SETOF regprocedure
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT f.fn::regprocedure
    FROM (
        VALUES
        ('producer', '@extschema@.to_epoch(timestamptz)'),
        ('producer', '@extschema@.message_create(text, bytea, bigint)'),
        ('consumer', '@extschema@.to_epoch(timestamptz)'),
        ('consumer', '@extschema@.message_dequeue(bigint, integer, text)'),
        ('consumer', '@extschema@.message_complete(bigint, integer)'),
        ('consumer', '@extschema@.message_defer(bigint, integer, bigint, bytea)'),
        ('consumer', '@extschema@.message_heartbeat(bigint, integer, bigint)'),
        ('admin', '@extschema@.to_epoch(timestamptz)'),
        ('admin', '@extschema@.message_create(text, bytea, bigint)'),
        ('admin', '@extschema@.message_dequeue(bigint, integer, text)'),
        ('admin', '@extschema@.message_complete(bigint, integer)'),
        ('admin', '@extschema@.message_defer(bigint, integer, bigint, bytea)'),
        ('admin', '@extschema@.message_heartbeat(bigint, integer, bigint)'),
        ('admin', '@extschema@.channel_set(text, integer, integer, bigint)'),
        ('admin', '@extschema@.channel_drop(text, boolean)')
    ) AS f (access, fn)
    WHERE f.access = p_access
$$;

COMMENT ON FUNCTION @extschema@._access_functions(text) IS
'Internal: the functions an access set (producer, consumer, admin) grants EXECUTE on.';

REVOKE ALL ON FUNCTION @extschema@._access_functions(text) FROM PUBLIC;
