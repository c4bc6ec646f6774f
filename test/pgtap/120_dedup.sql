\ir include/setup.psql
-- Deduplication keys (message_create's p_key) and the channel's dedup_window_ms.
SELECT plan(41);

-- The claim of a key: "message_id expires_at" ('held' while the message exists), or NULL.
CREATE FUNCTION pg_temp.claim(p_channel text, p_key text)
RETURNS text
LANGUAGE sql
AS $$
    SELECT k.message_id || ' ' || coalesce(k.expires_at::text, 'held')
    FROM lonnymq.message_key AS k
    -- (0.11.0: a channel's id is the hash of its name, row or not.)
    WHERE k.channel_id = hashtextextended(p_channel, 0) AND k.key = p_key
$$;

-- ---------------------------------------------------------------- while the message exists
SELECT lonnymq.message_create('d', 'one', NULL, 'k') AS k_id \gset
SELECT is(lonnymq.message_create('d', 'two', NULL, 'k'), :k_id::bigint, 'the same key returns the existing id');
SELECT is(pg_temp.lmq_count('d'), 1::bigint, 'and stores nothing');
SELECT is((SELECT content FROM lonnymq.message WHERE id = :k_id), 'one'::bytea, 'the existing message is unchanged');
SELECT is(pg_temp.claim('d', 'k'), :k_id || ' held', 'the key is claimed by the message');
SELECT isnt(lonnymq.message_create('d', 'other', NULL, 'k2'), :k_id::bigint, 'another key is another message');
SELECT isnt(lonnymq.message_create('e', 'one', NULL, 'k'), :k_id::bigint, 'another channel does not share keys');
SELECT is(pg_temp.lmq_count('e'), 1::bigint, 'and stores its own message');
SELECT lonnymq.message_create('d', 'plain'), lonnymq.message_create('d', 'plain');
SELECT is(pg_temp.lmq_count('d'), 4::bigint, 'messages without a key are never deduplicated');

-- Locked and deferred messages still hold their keys.
SELECT d.id AS k_got, d.num_attempts AS k_tok FROM lonnymq.message_dequeue(60000, 1, 'd') AS d \gset
SELECT is(:k_got::bigint, :k_id::bigint, '(the keyed message is delivered first)');
SELECT is(lonnymq.message_create('d', 'again', NULL, 'k'), :k_id::bigint, 'while the message is locked');
SELECT lonnymq.message_defer(:k_id, :k_tok, pg_temp.lmq_now() + 3600000);
SELECT is(lonnymq.message_create('d', 'again', NULL, 'k'), :k_id::bigint, 'while it is deferred');
SELECT is(pg_temp.lmq_count('d'), 4::bigint, 'still nothing stored');

-- ---------------------------------------------------------------- after completion, no window
SELECT lonnymq.message_create('w0', 'first', NULL, 'k') AS w0_id \gset
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'w0') AS d;
SELECT is(pg_temp.claim('w0', 'k'), NULL, 'dedup_window_ms 0: the claim goes with the complete');
SELECT lonnymq.message_create('w0', 'second', NULL, 'k') AS w0_second \gset
SELECT ok(:w0_second > :w0_id, 'the key is free at once: a new message');
SELECT is(pg_temp.lmq_count('w0'), 1::bigint, 'which is stored');

-- ---------------------------------------------------------------- after completion, with a window
SELECT lonnymq.channel_set('win', p_dedup_window_ms => 300);
SELECT lonnymq.message_create('win', 'first', NULL, 'k') AS win_id \gset
SELECT pg_temp.lmq_now() AS before_complete \gset
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'win') AS d;
SELECT pg_temp.lmq_now() AS after_complete \gset
SELECT ok(
    (SELECT expires_at BETWEEN :before_complete + 300 AND :after_complete + 300
     FROM lonnymq.message_key WHERE message_id = :win_id),
    'the claim expires dedup_window_ms after the complete'
);
SELECT is(lonnymq.message_create('win', 'dup', NULL, 'k'), :win_id::bigint, 'within the window the completed message''s id is returned');
SELECT is(pg_temp.lmq_count('win'), 0::bigint, 'and nothing is stored');
SELECT pg_sleep(greatest(0, :after_complete + 310 - pg_temp.lmq_now()) / 1000.0);
SELECT lonnymq.message_create('win', 'after', NULL, 'k') AS win_after \gset
SELECT ok(:win_after > :win_id, 'after the window: a new message');
SELECT is(pg_temp.claim('win', 'k'), :win_after || ' held', 'which takes the expired claim over');

-- A long window, expired by hand.
SELECT lonnymq.channel_set('long', p_dedup_window_ms => 3600000);
SELECT lonnymq.message_create('long', 'first', NULL, 'k') AS long_id \gset
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'long') AS d;
SELECT is(lonnymq.message_create('long', 'dup', NULL, 'k'), :long_id::bigint, 'a one-hour window holds the key');
UPDATE lonnymq.message_key SET expires_at = pg_temp.lmq_now() - 1 WHERE message_id = :long_id;
SELECT ok(lonnymq.message_create('long', 'after', NULL, 'k') > :long_id, 'once expired the key is free');

-- tick() deletes expired claims.
SELECT lonnymq.message_create('long', 'k2 first', NULL, 'k2') AS k2_id \gset
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 10, 'long') AS d WHERE d.id = :k2_id;
SELECT isnt(pg_temp.claim('long', 'k2'), NULL, 'a completed message''s claim is kept for the window');
UPDATE lonnymq.message_key SET expires_at = pg_temp.lmq_now() - 1 WHERE message_id = :k2_id;
SELECT lonnymq.tick();
SELECT is(pg_temp.claim('long', 'k2'), NULL, 'tick() deletes the expired claim');

-- Batches follow the same rules: a claim within its window holds, an expired one is taken over.
SELECT lonnymq.channel_set('bw', p_dedup_window_ms => 3600000);
SELECT lonnymq.message_create('bw', 'a', NULL, 'ka') AS bw_a, lonnymq.message_create('bw', 'b', NULL, 'kb') AS bw_b \gset
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 10, 'bw') AS d;
UPDATE lonnymq.message_key SET expires_at = pg_temp.lmq_now() - 1 WHERE message_id = :bw_b;
CREATE TEMP TABLE bwb AS
SELECT t.id, t.ord FROM lonnymq.message_create_batch('bw', ARRAY['a2', 'b2']::bytea[], NULL, ARRAY['ka', 'kb']) WITH ORDINALITY AS t (id, ord);
SELECT is((SELECT id FROM bwb WHERE ord = 1), :bw_a::bigint, 'batch: a key within its window gives the completed message''s id');
SELECT ok((SELECT id FROM bwb WHERE ord = 2) > :bw_b, 'batch: an expired claim is taken over by a new message');
SELECT is(pg_temp.claim('bw', 'kb'), (SELECT id FROM bwb WHERE ord = 2) || ' held', 'which holds the key now');
SELECT is(pg_temp.lmq_count('bw'), 1::bigint, 'only that one is stored');

-- ---------------------------------------------------------------- after dead-lettering
SELECT lonnymq.channel_set('dead0', p_max_attempts => 1);
SELECT lonnymq.channel_set('deadw', p_max_attempts => 1, p_dedup_window_ms => 3600000);
SELECT lonnymq.message_create('dead0', 'x', NULL, 'k') AS dead0_id, lonnymq.message_create('deadw', 'x', NULL, 'k') AS deadw_id \gset
SELECT lonnymq.message_fail(d.id, d.num_attempts, 'no') FROM lonnymq.message_dequeue(60000, 1, 'dead0') AS d;
SELECT lonnymq.message_fail(d.id, d.num_attempts, 'no') FROM lonnymq.message_dequeue(60000, 1, 'deadw') AS d;
SELECT is((SELECT count(*) FROM lonnymq.dead_letter WHERE id IN (:dead0_id, :deadw_id)), 2::bigint, 'both are dead letters');
SELECT ok(lonnymq.message_create('dead0', 'y', NULL, 'k') > :deadw_id, 'no window: a dead message''s key is free at once');
SELECT is(lonnymq.message_create('deadw', 'y', NULL, 'k'), :deadw_id::bigint, 'with a window: the dead message''s id is returned');
SELECT is(pg_temp.lmq_count('deadw'), 0::bigint, 'and nothing is stored');

-- ---------------------------------------------------------------- after cancel
SELECT lonnymq.channel_set('canc', p_dedup_window_ms => 3600000);
SELECT lonnymq.message_create('canc', 'x', NULL, 'k') AS canc_id \gset
SELECT is(lonnymq.message_cancel(:canc_id), TRUE, 'cancel');
SELECT is(pg_temp.claim('canc', 'k'), NULL, 'a cancelled message releases its key at once, whatever the window');
SELECT ok(lonnymq.message_create('canc', 'y', NULL, 'k') > :canc_id, 'so the same key makes a new message');

-- ---------------------------------------------------------------- before max_size
SELECT lonnymq.channel_set('full', p_max_size => 1);
SELECT lonnymq.message_create('full', 'only', NULL, 'k') AS full_id \gset
SELECT is(lonnymq.message_create('full', 'dup', NULL, 'k'), :full_id::bigint,
    'on a full channel a duplicate returns the existing id, not NULL');
SELECT is(lonnymq.message_create('full', 'new', NULL, 'other'), NULL, 'a new key on a full channel is dropped');
SELECT is(pg_temp.claim('full', 'other'), NULL, 'and claims nothing');

-- ---------------------------------------------------------------- bad keys
SELECT throws_ok($$ SELECT lonnymq.message_create('d', 'x', NULL, '') $$, '22023', NULL, 'an empty key raises 22023');
SELECT throws_ok($$ SELECT lonnymq.message_create('d', 'x', NULL, repeat('k', 1025)) $$, '22023', NULL,
    'a key over 1024 characters raises 22023');
SELECT isnt(lonnymq.message_create('d', 'x', NULL, repeat('k', 1024)), NULL, 'a key of 1024 characters is accepted');

SELECT * FROM finish();
ROLLBACK;
