-- Before anything is installed or changed: refuse a PostgreSQL major that
-- lonnymq is not tested on (every script runs in one transaction, so the
-- error leaves nothing behind).  The bounds are the majors of the test
-- matrix (lonnymq_dev/pgservers.py SUPPORTED_MAJORS, tools/build_sql_only.py).
-- Run by the install script and by every upgrade from 0.14.0 on.
DO $lonnymq_check$
BEGIN
    IF pg_catalog.current_setting('server_version_num')::integer / 10000 NOT BETWEEN 14 AND 18 THEN
        RAISE EXCEPTION 'lonnymq supports PostgreSQL 14 to 18; this server is %',
            pg_catalog.current_setting('server_version')
        USING
            ERRCODE = '0A000',
            HINT = 'Install it on a supported PostgreSQL version; nothing was changed.';
    END IF;
END;
$lonnymq_check$;
