-- Due schedules: the one probe message_dequeue adds to its path.
CREATE INDEX schedule_due_ix
ON @extschema@.schedule (next_at);
