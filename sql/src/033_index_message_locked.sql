-- Locked messages by expiry, per channel.  Used only for channels at their
-- max_concurrency: they may deliver nothing but their own expired locks, and
-- this index finds those without walking the channel's ready backlog.
CREATE INDEX message_locked_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE is_locked;
