-- Dead letters of one channel, in the order they were created as messages:
-- dead_letter_redrive(p_channel) and the channel_stats count.
CREATE INDEX dead_letter_channel_ix
ON @extschema@.dead_letter (channel, id);
