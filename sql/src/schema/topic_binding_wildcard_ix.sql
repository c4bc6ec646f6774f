-- The wildcard bindings by their first word (NULL: a pattern that starts
-- with '*' or '#'), which a publish tests against its key: those of the
-- key's first word and those that start with a wildcard.
CREATE INDEX topic_binding_wildcard_ix
ON @extschema@.topic_binding (head, pattern, channel)
WHERE regex IS NOT NULL;
