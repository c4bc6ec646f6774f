-- Complete (delete) a locked message, presenting its fencing token.
-- Returns false, changing nothing, when the token is stale or the message is
-- not locked (deferred, already completed, purged).  For an unconstrained
-- channel the channel row is read, never locked or written.
CREATE FUNCTION @extschema@.message_complete(
    p_id bigint,
    p_num_attempts integer
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_channel_id bigint;
    v_constrained boolean;
BEGIN
    PERFORM @extschema@._check_token(p_id, p_num_attempts);
    SELECT m.channel_id INTO v_channel_id
    FROM @extschema@.message AS m
    WHERE m.id = p_id;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    -- Lock order, as everywhere: the channel row before the message row.
    -- Only a channel with limits needs its row at all.
    SELECT c.max_concurrency IS NOT NULL OR c.max_size IS NOT NULL INTO v_constrained
    FROM @extschema@.channel AS c
    WHERE c.id = v_channel_id;
    IF v_constrained THEN
        PERFORM 1
        FROM @extschema@.channel AS c
        WHERE c.id = v_channel_id
        FOR NO KEY UPDATE;
    END IF;
    DELETE FROM @extschema@.message AS m
    WHERE
        m.id = p_id
        AND m.num_attempts = p_num_attempts
        AND m.is_locked;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    PERFORM @extschema@._channel_release(v_channel_id, TRUE, @extschema@._clock_ms());
    RETURN TRUE;
END;
$$;

COMMENT ON FUNCTION @extschema@.message_complete(bigint, integer) IS
'Complete a locked message: deletes it. Returns false (nothing changed) when p_num_attempts is not the current fencing token or the message is not locked.';

REVOKE ALL ON FUNCTION @extschema@.message_complete(bigint, integer) FROM PUBLIC;
