-- Internal: notify the listeners of lonnymq (LISTEN lonnymq) that a message
-- of p_channel is deliverable, with the payload the channel chose
-- (channel.notify_payload): its name, its id, or nothing.  PostgreSQL has
-- no access control on LISTEN: any role that may connect to the database
-- receives every payload, so a channel whose name is confidential sends its
-- id or nothing.  Delivered when the caller's transaction commits;
-- notifications with the same payload in one transaction are folded.
CREATE FUNCTION @extschema@._channel_notify(p_channel @extschema@.channel)
RETURNS void
LANGUAGE sql
VOLATILE
AS $$
    SELECT pg_catalog.pg_notify(
        'lonnymq',
        CASE p_channel.notify_payload
            WHEN 'id' THEN p_channel.id::text
            WHEN 'none' THEN ''
            ELSE p_channel.name
        END
    )
$$;

COMMENT ON FUNCTION @extschema@._channel_notify(@extschema@.channel) IS
'Internal: send a channel''s notification, with its name, its id or no payload (channel.notify_payload).';

REVOKE ALL ON FUNCTION @extschema@._channel_notify(@extschema@.channel) FROM PUBLIC;
