-- A channel's early messages (message.is_early), in (dequeue_at, id) order:
-- every take looks here for its turns' channels (one probe, which finds
-- nothing unless the channel has a priority message, a long transaction's
-- or a recovered lock waiting), and delivers those that sort before the
-- turns' holders.  Small: only messages more than a second out of order.
-- Only ready messages are early (schema/message.sql), but the database does
-- not enforce it: the position test keeps a stray flag on a message that is
-- not ready from giving it a turn.
CREATE INDEX message_early_ix
ON @extschema@.message (channel_id, dequeue_at, id)
WHERE is_early AND position IS NOT NULL;
