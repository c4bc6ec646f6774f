-- Producer-side counter for channels with max_size.  Only producers of a
-- size-limited channel lock this row (they must serialise to enforce an exact
-- limit); removals are counted on channel.num_removed instead, so a complete
-- never waits for a producer's open transaction.
-- Messages held = num_created - channel.num_removed.
CREATE TABLE @extschema@.channel_quota (
    channel_id bigint NOT NULL,
    num_created bigint NOT NULL,
    CONSTRAINT channel_quota_pkey PRIMARY KEY (channel_id)
) WITH (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 1000
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_quota', '');

COMMENT ON TABLE @extschema@.channel_quota IS
'Producer-side counter of a channel with max_size, locked only by its producers; internal state maintained by the queue functions, not to be written by hand.';

COMMENT ON COLUMN @extschema@.channel_quota.channel_id IS
'The channel (channel.id).';

COMMENT ON COLUMN @extschema@.channel_quota.num_created IS
'Messages created in the channel, internal state maintained by the queue functions, not to be written by hand; compared with channel.num_removed to enforce max_size.';
