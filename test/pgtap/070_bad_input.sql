\ir include/setup.psql
-- Bad input to the core calls (create, dequeue, complete, defer, heartbeat,
-- channel_set, channel_drop): each is refused with its SQLSTATE (or returns
-- its "nothing done" value) and changes nothing.
\ir include/outcome.psql

-- A queue with something in every state.
SELECT lonnymq.channel_set('lim', 1, 3, 0);
SELECT lonnymq.message_create('lim', 'a'), lonnymq.message_create('lim', 'b'), lonnymq.message_create('lim', 'c');
SELECT lonnymq.message_create('free', 'x'), lonnymq.message_create('free', 'later', 4102444800000);
CREATE TEMP TABLE held AS SELECT * FROM lonnymq.message_dequeue(60000, 2);
SELECT id AS held_id, num_attempts AS held_token FROM held ORDER BY id LIMIT 1 \gset
SELECT id AS done_id, num_attempts AS done_token FROM held ORDER BY id DESC LIMIT 1 \gset
SELECT lonnymq.message_complete(:done_id, :done_token);

CREATE TEMP TABLE bad (call text, expected text);
INSERT INTO bad VALUES
    -- NULLs where not allowed
    ($$ SELECT lonnymq.message_create(NULL, 'x') $$, 'error 22004'),
    ($$ SELECT lonnymq.message_create('free', NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_dequeue(NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_complete(NULL, 1) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_complete(1, NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_defer(NULL, 1) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_heartbeat(1, NULL, 1000) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_heartbeat(1, 1, NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.channel_set(NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.channel_drop(NULL) $$, 'error 22004'),
    ($$ SELECT lonnymq.channel_drop('free', NULL) $$, 'error 22004'),
    -- empty and over-long names
    ($$ SELECT lonnymq.message_create('', 'x') $$, 'error 22023'),
    ($$ SELECT lonnymq.message_create(repeat('n', 256), 'x') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set(repeat('n', 256)) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_dequeue(1000, 1, '') $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_drop('') $$, 'error 22023'),
    -- lock durations and limits
    ($$ SELECT lonnymq.message_dequeue(0) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_dequeue(-1) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_dequeue(9223372036854775807) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_dequeue(31536000001) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_dequeue(1000, 0) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_dequeue(1000, -5) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_dequeue(1000, 1001) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_heartbeat(1, 1, 0) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_heartbeat(1, 1, -9223372036854775807) $$, 'error 22023'),
    -- channel limits
    ($$ SELECT lonnymq.channel_set('free', 0) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('free', -1) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('free', NULL, 0) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('free', NULL, NULL, -1) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('free', NULL, NULL, 31536000001) $$, 'error 22023'),
    -- oversized content and state
    ($$ SELECT lonnymq.message_create('free', convert_to(repeat('x', 16777217), 'UTF8')) $$, 'error 54000'),
    ($$ SELECT lonnymq.message_defer(1, 1, NULL, convert_to(repeat('x', 16777217), 'UTF8')) $$, 'error 54000'),
    -- dropping a channel that holds (locked) messages
    ($$ SELECT lonnymq.channel_drop('lim') $$, 'error 55006'),
    -- expected outcomes: return values, nothing changed
    ($$ SELECT lonnymq.message_create('lim', 'over') $$, 'returned NULL'),
    ($$ SELECT lonnymq.message_complete(9223372036854775807, 1) $$, 'returned false'),
    ($$ SELECT lonnymq.message_complete(-1, 1) $$, 'returned false'),
    ($$ SELECT lonnymq.message_defer(9223372036854775807, 1) $$, 'returned false'),
    ($$ SELECT lonnymq.message_heartbeat(9223372036854775807, 1, 1000) $$, 'returned false'),
    ($$ SELECT lonnymq.channel_drop('no-such-channel') $$, 'returned false'),
    ($$ SELECT count(*) FROM lonnymq.message_dequeue(1000, 1, 'no-such-channel') $$, 'returned 0'),
    (format($$ SELECT lonnymq.message_complete(%s, %s) $$, :held_id, :held_token - 1), 'returned false'),
    (format($$ SELECT lonnymq.message_complete(%s, %s) $$, :held_id, :held_token + 1), 'returned false'),
    (format($$ SELECT lonnymq.message_complete(%s, %s) $$, :held_id, -2147483648), 'returned false'),
    (format($$ SELECT lonnymq.message_defer(%s, %s) $$, :held_id, :held_token + 1), 'returned false'),
    (format($$ SELECT lonnymq.message_heartbeat(%s, %s, 1000) $$, :held_id, :held_token - 1), 'returned false'),
    -- a second complete, and calls on the completed message
    (format($$ SELECT lonnymq.message_complete(%s, %s) $$, :done_id, :done_token), 'returned false'),
    (format($$ SELECT lonnymq.message_defer(%s, %s) $$, :done_id, :done_token), 'returned false'),
    (format($$ SELECT lonnymq.message_heartbeat(%s, %s, 1000) $$, :done_id, :done_token), 'returned false'),
    -- absurd values on calls that are refused for another reason first
    ($$ SELECT lonnymq.message_create(NULL, NULL, 9223372036854775807) $$, 'error 22004'),
    ($$ SELECT lonnymq.message_dequeue(-9223372036854775808, -2147483648, '') $$, 'error 22023'),
    ($$ SELECT lonnymq.message_dequeue(1000, 2147483647) $$, 'error 22023'),
    ($$ SELECT lonnymq.channel_set('free', -2147483648, -2147483648, -9223372036854775808) $$, 'error 22023'),
    ($$ SELECT lonnymq.message_defer(9223372036854775807, 2147483647, -9223372036854775808) $$, 'returned false');

SELECT plan((SELECT count(*)::integer FROM bad) + 2);
SELECT cmp_ok((SELECT count(*) FROM bad WHERE expected LIKE 'error%'), '>=', 30::bigint, 'at least 30 bad calls');

SELECT is(pg_temp.lmq_outcome(call), expected || ', nothing changed', call)
FROM bad;

SELECT is(lonnymq.message_complete(:held_id, :held_token), TRUE, 'the real token still works after all that');

SELECT * FROM finish();
ROLLBACK;
