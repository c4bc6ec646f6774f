-- Internal: the anchored regular expression of a topic pattern with a '*' or
-- '#' word, NULL for one without (matched by equality).  Words are separated
-- by '.'; '*' is one word (possibly empty, as in AMQP), '#' zero or more words
-- with their separators; consecutive '#' words are one.  Other words match
-- themselves, every character but letters, digits, '_', '-' and space escaped.
-- topic_bind stores it in topic_binding.regex.
-- Parameters: p_pattern, the topic pattern (checked by the caller,
--   _check_topic).
-- Returns: the regular expression, or NULL for a pattern without wildcards.
-- Calls: none.
-- Tables: none.
-- Locks: none.
CREATE FUNCTION @extschema@._topic_regex(p_pattern text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_words text[] := pg_catalog.string_to_array(p_pattern, '.');
    v_regex text := '';
    v_word text;
    v_n integer := 0;
    v_after_lead boolean := FALSE;
BEGIN
    IF NOT ('*' = ANY(v_words) OR '#' = ANY(v_words)) THEN
        RETURN NULL;
    END IF;
    FOREACH v_word IN ARRAY v_words LOOP
        v_n := v_n + 1;
        CONTINUE WHEN v_word = '#' AND v_n > 1 AND v_words[v_n - 1] = '#';
        IF v_word = '#' THEN
            -- Leading: whole words each with its dot; later: each word
            -- with the dot before it (so "a.#" matches "a").
            v_regex := v_regex || CASE WHEN v_n = 1 THEN '(?:[^.]*\.)*' ELSE '(?:\.[^.]*)*' END;
            v_after_lead := v_n = 1;
            CONTINUE;
        END IF;
        v_regex := v_regex || CASE WHEN v_n = 1 OR v_after_lead THEN '' ELSE '\.' END || CASE
            WHEN v_word = '*' THEN '[^.]*'
            ELSE pg_catalog.regexp_replace(v_word, '([^[:alnum:]_ -])', '\\\1', 'g')
        END;
        v_after_lead := FALSE;
    END LOOP;
    -- A pattern of '#' words only matches every key.
    RETURN '^' || CASE WHEN v_words <@ ARRAY['#'] THEN '.*' ELSE v_regex END || '$';
END;
$$;

COMMENT ON FUNCTION @extschema@._topic_regex(text) IS
'Internal: the anchored regular expression of a topic pattern with * or # words (NULL without).';

REVOKE ALL ON FUNCTION @extschema@._topic_regex(text) FROM PUBLIC;
