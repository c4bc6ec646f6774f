-- Internal: the slow path of _channel_pattern_config, when the greatest
-- prefix not after the name, p_missed, is not a prefix of it.  The longest
-- prefix of the name among the patterns is then a prefix of the part the
-- name shares with p_missed (anything longer would sort after p_missed and
-- not after the name), so the probe repeats with that part as its bound.
-- Each round shortens the bound: at most the name's length (255) probes of
-- channel_prefix_key, one or two in practice.
-- Returns: the follower's configuration (_channel_follower), or NULL when
-- no pattern matches.
-- Tables: reads channel (channel_prefix_key).
CREATE FUNCTION @extschema@._channel_pattern_search(p_channel text, p_missed text)
RETURNS @extschema@.channel
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_bound text COLLATE "C" := p_channel;
    v_missed text COLLATE "C" := p_missed;
    v_shared integer;
    v_over integer;
    v_half integer;
    v_pattern @extschema@.channel%ROWTYPE;
BEGIN
    LOOP
        -- The length of the part they share, by bisection: the first
        -- v_shared characters agree, the first v_over do not.
        v_shared := 0;
        v_over := LEAST(pg_catalog.length(v_missed), pg_catalog.length(v_bound)) + 1;
        WHILE v_over - v_shared > 1 LOOP
            v_half := (v_shared + v_over) / 2;
            IF pg_catalog.left(v_missed, v_half) = pg_catalog.left(v_bound, v_half) THEN
                v_shared := v_half;
            ELSE
                v_over := v_half;
            END IF;
        END LOOP;
        v_bound := pg_catalog.left(v_bound, v_shared);
        SELECT p.* INTO v_pattern
        FROM @extschema@.channel AS p
        WHERE p.prefix <= v_bound AND p.prefix IS NOT NULL
        ORDER BY p.prefix DESC
        LIMIT 1;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        IF pg_catalog.starts_with(v_bound, v_pattern.prefix) THEN
            RETURN @extschema@._channel_follower(v_pattern, p_channel);
        END IF;
        v_missed := v_pattern.prefix;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION @extschema@._channel_pattern_search(text, text) IS
'Internal: the longest pattern prefix of a channel name when the first probe missed; at most one probe per character of the name.';

REVOKE ALL ON FUNCTION @extschema@._channel_pattern_search(text, text) FROM PUBLIC;
