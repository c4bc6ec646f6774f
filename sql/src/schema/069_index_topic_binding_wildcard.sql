-- The wildcard bindings, which every publish tests against its key.
CREATE INDEX topic_binding_wildcard_ix
ON @extschema@.topic_binding (pattern, channel)
WHERE regex IS NOT NULL;
