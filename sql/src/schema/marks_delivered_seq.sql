-- The deliveries counted (messages_delivered_seq) when the marks were last
-- raised.  A raise would find nothing to move while no message was
-- delivered since: _marks_raise then does nothing (it does not even try
-- the raise lock), so that idle workers polling an empty queue write
-- nothing (a raise writes eight sequences and takes a transaction id); and
-- a dequeue's turn to raise comes _marks_turn_deliveries (8) deliveries
-- after the last raise.
CREATE SEQUENCE @extschema@.marks_delivered_seq AS bigint
MINVALUE 0 START 0;

-- Called, so that pg_sequence_last_value reads it (see epoch_at_seq).
SELECT pg_catalog.setval('@extschema@.marks_delivered_seq', 0, TRUE);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.marks_delivered_seq', '');

COMMENT ON SEQUENCE @extschema@.marks_delivered_seq IS
'Delivery, internal state maintained by the queue functions, not to be written by hand: messages_delivered_seq''s value when the marks were last raised.';
