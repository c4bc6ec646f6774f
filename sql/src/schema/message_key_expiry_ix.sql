-- Expired claims, oldest first: keyed creates and tick() delete a few at a
-- time, so the table holds the live keys plus at most a window's worth.
CREATE INDEX message_key_expiry_ix
ON @extschema@.message_key (expires_at)
WHERE expires_at IS NOT NULL;
