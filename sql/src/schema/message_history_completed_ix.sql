-- history_prune: the oldest completions first.
CREATE INDEX message_history_completed_ix
ON @extschema@.message_history (completed_at);
