-- When the epoch before the current one began (epoch ms).  The due entries
-- of that epoch's writers are not below it: a raise from a
-- transaction-level snapshot keeps its due mark below it (_marks_raise).
-- 0 until the first raise: before every entry of message_due_ix (whose key
-- is at least a creation time).
CREATE SEQUENCE @extschema@.epoch_previous_at_seq AS bigint
MINVALUE -9223372036854775808 START 0;

-- Called, so that pg_sequence_last_value reads it (see position_bound_seq).
SELECT pg_catalog.setval('@extschema@.epoch_previous_at_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.epoch_previous_at_seq', '');

COMMENT ON SEQUENCE @extschema@.epoch_previous_at_seq IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: the clock (epoch ms) when the epoch before the current one began.';
