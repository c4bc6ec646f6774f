-- Internal: the retry delay after the message's p_attempt-th failure (1 = its
-- first failed delivery: fail calls and expired locks count, defers do not):
-- min(backoff_max_ms, backoff_base_ms * backoff_factor ^ (p_attempt - 1)),
-- less a random part of up to backoff_jitter of it, so retries of one burst
-- spread out and never exceed the cap; 0 when backoff_base_ms or
-- backoff_max_ms is 0.  The comparison with the cap is made in logarithms, so
-- that no attempt count overflows.  VOLATILE: random().
-- Parameters: p_channel, the message's channel configuration
--   (_message_channel); p_attempt, its failures including this one
--   (message.num_failures + 1).
-- Returns: the delay in ms, 0 to backoff_max_ms.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._backoff_ms(
    p_channel @extschema@.channel,
    p_attempt integer
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_delay double precision;
BEGIN
    IF p_channel.backoff_base_ms = 0 OR p_channel.backoff_max_ms = 0 THEN
        RETURN 0;
    END IF;
    IF pg_catalog.ln(p_channel.backoff_base_ms::double precision)
        + pg_catalog.ln(p_channel.backoff_factor) * pg_catalog.int4larger(p_attempt - 1, 0)
        >= pg_catalog.ln(p_channel.backoff_max_ms::double precision) THEN
        v_delay := p_channel.backoff_max_ms;
    ELSE
        v_delay := p_channel.backoff_base_ms
            * p_channel.backoff_factor ^ pg_catalog.int4larger(p_attempt - 1, 0);
    END IF;
    RETURN pg_catalog.floor(v_delay * (1.0 - p_channel.backoff_jitter * pg_catalog.random()))::bigint;
END;
$$;

COMMENT ON FUNCTION @extschema@._backoff_ms(@extschema@.channel, integer) IS
'Internal: the retry delay of a channel''s backoff policy after a failed attempt.';

REVOKE ALL ON FUNCTION @extschema@._backoff_ms(@extschema@.channel, integer) FROM PUBLIC;
