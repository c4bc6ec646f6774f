-- When the current epoch began (epoch ms): writers of the epoch read their
-- clocks after it, so their entries of message_due_ix are not below it.
CREATE SEQUENCE @extschema@.epoch_at_seq AS bigint
MINVALUE -9223372036854775808 START 0;

-- Called, so that pg_sequence_last_value reads it: a SELECT from the
-- sequence's relation, a seq scan, took 49 ms under the entry points'
-- enable_seqscan = off (measured), against 0.02 ms.
SELECT pg_catalog.setval('@extschema@.epoch_at_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.epoch_at_seq', '');

COMMENT ON SEQUENCE @extschema@.epoch_at_seq IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: the clock (epoch ms) when the current epoch began.';
