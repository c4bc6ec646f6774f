-- Internal: p_count messages were put back into a channel by
-- dead_letter_redrive (its guard held shared): count them towards max_size,
-- wake the channel, lower its floor and notify, as a producer would.
CREATE FUNCTION @extschema@._dead_letter_requeued(
    p_channel @extschema@.channel,
    p_count integer,
    p_now bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF p_channel.max_size IS NOT NULL THEN
        UPDATE @extschema@.channel_quota AS q
        SET num_created = q.num_created + p_count
        WHERE q.channel_id = p_channel.id;
    END IF;
    PERFORM @extschema@._channel_arrival(p_channel, p_now, p_now);
END;
$$;

COMMENT ON FUNCTION @extschema@._dead_letter_requeued(@extschema@.channel, integer, bigint) IS
'Internal: account for redriven dead letters in their channel (max_size count, wake-up, notification).';

REVOKE ALL ON FUNCTION @extschema@._dead_letter_requeued(@extschema@.channel, integer, bigint) FROM PUBLIC;
