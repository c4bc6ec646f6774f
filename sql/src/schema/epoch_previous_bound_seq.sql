-- The bound of the epoch before the current one (bound, not bound * 2 +
-- parity).  A raise from a transaction-level snapshot (REPEATABLE READ,
-- SERIALIZABLE) cannot see the writers of the previous epoch that committed
-- after its snapshot; their positions are at least this bound, so its
-- position mark stays at or below it (_marks_raise).
CREATE SEQUENCE @extschema@.epoch_previous_bound_seq AS bigint MINVALUE 0 START 0;

-- Called, so that pg_sequence_last_value reads it (see position_bound_seq).
SELECT pg_catalog.setval('@extschema@.epoch_previous_bound_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.epoch_previous_bound_seq', '');

COMMENT ON SEQUENCE @extschema@.epoch_previous_bound_seq IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: the bound of the epoch before the current one.';
