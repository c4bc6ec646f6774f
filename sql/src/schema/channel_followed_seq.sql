-- Whether a channel was ever configured, in this database, with something
-- a completion must follow: history (retain_history), a size limit
-- (max_size), or admission (max_concurrency, a release interval, an
-- ordered channel, a pause).  0 until the first one (channel_set,
-- channel_pause: a pattern's limits are set by channel_set on the
-- pattern's row, which its followers' rows copy), then 1 for good (a
-- configuration changed back, a dropped row, or a transaction rolled back
-- leaves it at 1: the flag only tells when the probes can be skipped).
-- Set before the configuration's row is written (before channel_set waits
-- for the completions in flight), so that a completion that sees such a
-- row, or waited for its writer, sees the flag.  A completion follows a
-- message's channel (its row lock, its history, its size count, its
-- admission) only when it is 1, or when a pattern was ever set
-- (channel_pattern_seq: a pattern's history setting): a channel configured
-- only with what the producer, the take or a failure reads (retries,
-- backoff, dedup window, notify) costs a completion nothing, and the
-- probes, out of line (_channel_rows_lock, _channel_has_row), are neither
-- run nor prepared (the worker loop on a channel configured with
-- max_attempts: 101.2 plan nodes a message with the row probes, 60.5
-- without, as on a channel without a row; bench/plan_counts.py).
-- Named channel_row_seq, and set by any channel row, from 0.13.1 to 0.14.0.
CREATE SEQUENCE @extschema@.channel_followed_seq AS bigint
MINVALUE 0 MAXVALUE 1 START 0;

-- (Called, so that pg_sequence_last_value reads 0, not NULL.)
SELECT pg_catalog.setval('@extschema@.channel_followed_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.channel_followed_seq', '');

COMMENT ON SEQUENCE @extschema@.channel_followed_seq IS
'Configuration, internal state maintained by channel_set and channel_pause, not to be written by hand: 1 once a channel was configured with history, max_size or a limit (something its completions follow), else 0.';
