-- Internal: claim (channel, key) for the message about to be stored as
-- p_message_id.  Returns NULL when the claim is ours (store the message), or
-- the id of the message that holds the key: one that exists, or was completed
-- or dead-lettered less than the channel's dedup window ago.  An expired claim
-- is taken over.  A duplicate locks nothing.  A concurrent producer of the
-- same key makes the INSERT wait for its transaction: if it commits, this one
-- sees its claim; if it rolls back, this one claims.  Under REPEATABLE READ a
-- claim committed after the snapshot raises 40001 (retry the transaction); so
-- does a key that changed hands three times during the call.  Ended claims are
-- deleted by _message_key_reap (two at each keyed message_create, up to 10000
-- by tick()).  Callers: message_create, message_create_batch.
-- Parameters: p_channel_id, the channel's id; p_key, the key; p_message_id,
--   the id the new message will have; p_now, the caller's clock (a claim whose
--   expires_at is at or before it has ended).
-- Returns: NULL when the claim is p_message_id's, else the id of the message
--   that holds the key.
-- Calls: none.
-- Tables: reads message_key (message_key_pkey: the claim that stood in the
--   way); writes message_key (a new claim inserted, or an expired one taken
--   over).
-- Locks: the claim row it inserts or updates; the INSERT waits for a
--   concurrent producer's uncommitted claim of the same key; a live claim is
--   read without a lock.
CREATE FUNCTION @extschema@._message_key_claim(
    p_channel_id bigint,
    p_key text,
    p_message_id bigint,
    p_now bigint
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_claim record;
BEGIN
    FOR v_try IN 1..3 LOOP
        INSERT INTO @extschema@.message_key (channel_id, key, message_id)
        VALUES (p_channel_id, p_key, p_message_id)
        ON CONFLICT (channel_id, key) DO NOTHING;
        IF FOUND THEN
            RETURN NULL;
        END IF;
        -- Read without locking: a producer told "duplicate" must not hold
        -- up the holder's complete, cancel or dead-lettering.
        SELECT k.message_id, k.expires_at INTO v_claim
        FROM @extschema@.message_key AS k
        WHERE k.channel_id = p_channel_id AND k.key = p_key;
        IF FOUND THEN
            IF v_claim.expires_at IS NULL OR v_claim.expires_at > p_now THEN
                RETURN v_claim.message_id;
            END IF;
            -- Expired: take it over, unless someone else just did.
            UPDATE @extschema@.message_key AS k
            SET message_id = p_message_id, expires_at = NULL
            WHERE k.channel_id = p_channel_id AND k.key = p_key AND k.expires_at <= p_now;
            IF FOUND THEN
                RETURN NULL;
            END IF;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'lonnymq: key "%" keeps changing hands, retry', p_key
        USING ERRCODE = '40001';
END;
$$;

COMMENT ON FUNCTION @extschema@._message_key_claim(bigint, text, bigint, bigint) IS
'Internal: claim a deduplication key for a new message; returns the id of the message holding it, or NULL when claimed.';

REVOKE ALL ON FUNCTION @extschema@._message_key_claim(bigint, text, bigint, bigint) FROM PUBLIC;
