-- Due schedules, by greatest(next_at, set_at): the delivery's probes
-- start at the due mark (see the schedule table).
CREATE INDEX schedule_due_ix
ON @extschema@.schedule ((greatest(next_at, set_at)));
