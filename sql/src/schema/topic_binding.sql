-- Topic bindings (topic_bind): a message published with a routing key
-- (message_publish) is created in every channel bound by a pattern that
-- matches the key, once per channel.  Keys and patterns are dot-separated
-- words, as AMQP topic exchanges and PGMQ write them: in a pattern, a word
-- '*' is exactly one word and '#' zero or more.  A pattern without them
-- is found by one probe of topic_binding_pkey (pattern = key); one with
-- them is tested against the key (its regex), and only when its first word
-- (head) is the key's first word or a wildcard (topic_binding_wildcard_ix):
-- a publish reads the bindings its key matches exactly, the wildcard
-- bindings of its first word and those that start with '*' or '#'.
CREATE TABLE @extschema@.topic_binding (
    pattern text NOT NULL,
    channel text NOT NULL,
    regex text,
    head text,
    created_at bigint NOT NULL,
    CONSTRAINT topic_binding_pkey PRIMARY KEY (pattern, channel),
    CONSTRAINT topic_binding_pattern_check CHECK (
        pg_catalog.length(pattern) BETWEEN 1 AND 255
    ),
    CONSTRAINT topic_binding_channel_check CHECK (
        pg_catalog.length(channel) BETWEEN 1 AND 255
    )
) WITH (
    -- (Bindings change seldom: configuration, not traffic.)
    autovacuum_vacuum_threshold = 100
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.topic_binding', '');

COMMENT ON TABLE @extschema@.topic_binding IS
'Topic bindings (topic_bind): message_publish creates its message in every channel bound by a pattern that matches the routing key, once per channel.';

COMMENT ON COLUMN @extschema@.topic_binding.pattern IS
'Dot-separated words; a word * matches exactly one word of a routing key, # zero or more.';

COMMENT ON COLUMN @extschema@.topic_binding.channel IS
'The channel a matching publish creates its message in (by name; binding does not create the channel).';

COMMENT ON COLUMN @extschema@.topic_binding.regex IS
'For a pattern with a * or # word: the anchored regular expression the routing key is tested against; NULL for a pattern matched by equality.';

COMMENT ON COLUMN @extschema@.topic_binding.head IS
'For a wildcard pattern: its first word when that is not * or # (a publish tests the pattern only against keys with that first word); NULL for a pattern that starts with a wildcard (tested against every key) or without wildcards.';

COMMENT ON COLUMN @extschema@.topic_binding.created_at IS
'When the binding was made, in epoch milliseconds.';
