\timing on
CREATE SCHEMA IF NOT EXISTS micro;
CREATE SEQUENCE IF NOT EXISTS micro.s;
CREATE UNLOGGED TABLE IF NOT EXISTS micro.dummy (x int);
CREATE TABLE IF NOT EXISTS micro.delta (created int NOT NULL DEFAULT 0, delivered int NOT NULL DEFAULT 0, completed int NOT NULL DEFAULT 0, failed int NOT NULL DEFAULT 0, dead_lettered int NOT NULL DEFAULT 0, locks_expired int NOT NULL DEFAULT 0);
SET synchronous_commit = off;
-- baseline loop, then 200,000 nextval in one statement (one backend, no contention)
SELECT count(g) FROM generate_series(1, 200000) g;
SELECT count(nextval('micro.s')) FROM generate_series(1, 200000) g;
-- 200,000 PL/pgSQL assignments v := nextval() (as variant B) vs an empty loop
DO $$ DECLARE v bigint; BEGIN FOR i IN 1..200000 LOOP v := i; END LOOP; END $$;
DO $$ DECLARE v bigint; BEGIN FOR i IN 1..200000 LOOP v := nextval('micro.s'::regclass); END LOOP; END $$;
-- 200,000 single-row INSERTs into the delta table from PL/pgSQL (as variant C, per call)
DO $$ BEGIN FOR i IN 1..200000 LOOP INSERT INTO micro.delta (completed) VALUES (1); END LOOP; END $$;
SELECT pg_size_pretty(pg_relation_size('micro.delta'));
DROP SCHEMA micro CASCADE;
