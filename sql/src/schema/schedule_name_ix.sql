-- A schedule by its name (schedule_set, schedule_drop).  Not unique: see
-- the table; schedule_set keeps one row per name.
CREATE INDEX schedule_name_ix
ON @extschema@.schedule (name);
