"""Counter variants of lonnymq's bench 'floor' worker loop (bench/clients.py FLOOR_DDL).

Every variant is a schema holding the floor's table `m` and its two worker-loop
functions `create(bytea)` and `complete_dequeue(bigint[], integer[], bigint)`,
same signatures, plus what it needs to count events.  The floor's SQL is
copied verbatim (checked against bench.clients.FLOOR_DDL by check_floor()).

Counters: created, delivered, completed, failed, dead_lettered, locks_expired.
The worker loop only produces created (create), completed and delivered
(complete_dequeue); the other three exist in every variant's storage so the
row / sequence layout is the real one.
"""

COUNTERS = ("created", "delivered", "completed", "failed", "dead_lettered", "locks_expired")

HEAD = "LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$"


def table(s: str) -> str:
    return f"""
DROP SCHEMA IF EXISTS {s} CASCADE;
CREATE SCHEMA {s};
CREATE TABLE {s}.m (
    id bigserial PRIMARY KEY,
    channel_id bigint NOT NULL,
    dequeue_at bigint NOT NULL,
    is_locked boolean NOT NULL DEFAULT false,
    num_attempts integer NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    content bytea NOT NULL
) WITH (fillfactor = 70);
CREATE INDEX ON {s}.m (channel_id, dequeue_at, id);
"""


def take(s: str) -> str:
    return f"""    UPDATE {s}.m AS m
    SET dequeue_at = v_now + p_lock_ms, is_locked = true, num_attempts = m.num_attempts + 1
    WHERE m.id = (
        SELECT q.id FROM {s}.m AS q
        WHERE q.channel_id = 1 AND q.dequeue_at <= v_now
        ORDER BY q.dequeue_at, q.id LIMIT 1 FOR UPDATE SKIP LOCKED
    )
    RETURNING m.id, m.num_attempts, m.content INTO id, num_attempts, content;
"""


def functions(s: str, *, create_decl="", create_count="", cd_decl="", after_delete="", after_take="") -> str:
    """The floor's create and complete_dequeue with hooks for counting."""
    return f"""
CREATE FUNCTION {s}.create(p_content bytea) RETURNS bigint
{HEAD}
DECLARE v_id bigint;{create_decl}
BEGIN
    INSERT INTO {s}.m (channel_id, dequeue_at, created_at, content)
    VALUES (1, (extract(epoch FROM now()) * 1000)::bigint,
            (extract(epoch FROM clock_timestamp()) * 1000)::bigint, p_content)
    RETURNING id INTO v_id;
{create_count}    RETURN v_id;
END $$;
CREATE FUNCTION {s}.complete_dequeue(
    p_ids bigint[], p_num_attempts integer[], p_lock_ms bigint, OUT id bigint, OUT num_attempts integer, OUT content bytea)
{HEAD}
#variable_conflict use_column
DECLARE v_now bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;{cd_decl}
BEGIN
    DELETE FROM {s}.m AS m
    USING ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)) AS t (id, num_attempts)
    WHERE m.id = t.id AND m.num_attempts = t.num_attempts AND m.is_locked;
{after_delete}{take(s)}{after_take}END $$;
"""


# ---------------------------------------------------------------- A: the floor
def ddl_a(s="v_a"):
    return table(s) + functions(s)


# ------------------------------------------------ B: one sequence per counter
def seqs(s):
    return "".join(f"CREATE SEQUENCE {s}.c_{c};\n" for c in COUNTERS)


def ddl_b(s="v_b", created_from_id=False):
    """nextval per event; assignment (a PL/pgSQL simple expression, no SPI
    executor) rather than PERFORM.  created_from_id: no counter in create, the
    id sequence m_id_seq is the 'created' counter (variant D2)."""
    create_count = "" if created_from_id else f"    v_x := pg_catalog.nextval('{s}.c_created'::pg_catalog.regclass);\n"
    return table(s) + seqs(s) + functions(
        s,
        create_decl="" if created_from_id else " v_x bigint;",
        create_count=create_count,
        cd_decl=" v_n bigint; v_x bigint;",
        after_delete=(
            "    GET DIAGNOSTICS v_n = ROW_COUNT;\n"
            "    FOR i IN 1 .. v_n LOOP\n"
            f"        v_x := pg_catalog.nextval('{s}.c_completed'::pg_catalog.regclass);\n"
            "    END LOOP;\n"
        ),
        after_take=(
            "    IF FOUND THEN\n"
            f"        v_x := pg_catalog.nextval('{s}.c_delivered'::pg_catalog.regclass);\n"
            "    END IF;\n"
        ),
    )


def read_b(s="v_b", created_from_id=False):
    parts = []
    for c in COUNTERS:
        seq = "m_id_seq" if (c == "created" and created_from_id) else f"c_{c}"
        parts.append(f"(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {s}.{seq}) AS {c}")
    return "SELECT " + ", ".join(parts)


# ------------------------------------ C: per-call insert into a delta table
def delta_tables(s):
    cols = ", ".join(f"{c} integer NOT NULL DEFAULT 0" for c in COUNTERS)
    tcols = ", ".join(f"{c} bigint NOT NULL DEFAULT 0" for c in COUNTERS)
    sets = ", ".join(f"{c} = t.{c} + d.{c}" for c in COUNTERS)
    sums = ", ".join(f"coalesce(sum({c}), 0) AS {c}" for c in COUNTERS)
    return f"""
-- append-only: no index, one row per call (all counters of the call in one row)
CREATE TABLE {s}.delta ({cols});
CREATE TABLE {s}.totals (one boolean PRIMARY KEY DEFAULT true CHECK (one), {tcols});
INSERT INTO {s}.totals DEFAULT VALUES;
-- fold at most p_limit delta rows into totals; one folder at a time (the
-- others return -1 at once: no waiting in a worker's transaction)
CREATE FUNCTION {s}.fold(p_limit integer) RETURNS integer
{HEAD}
DECLARE v_n integer;
BEGIN
    IF NOT pg_catalog.pg_try_advisory_xact_lock(2028, 1) THEN
        RETURN -1;
    END IF;
    WITH x AS (
        DELETE FROM {s}.delta AS d
        WHERE d.ctid = ANY (ARRAY(SELECT q.ctid FROM {s}.delta AS q LIMIT p_limit))
        RETURNING d.*
    ), d AS (SELECT count(*) AS n, {sums} FROM x)
    UPDATE {s}.totals AS t SET {sets}
    FROM d WHERE d.n > 0
    RETURNING d.n INTO v_n;
    RETURN coalesce(v_n, 0);
END $$;
"""


def ddl_c(s="v_c", fold_every=0, created_from_id=False):
    """fold_every > 0: complete_dequeue folds (up to 4 * fold_every rows)
    when the id it takes is a multiple of fold_every (a bounded step in the
    worker's own transaction, about once per fold_every messages);
    0: someone else calls fold() (periodic).  created_from_id: create counts
    nothing; the id sequence is 'created' (variant D3)."""
    after_take = (
        "    IF id IS NOT NULL OR v_n > 0 THEN\n"
        f"        INSERT INTO {s}.delta (delivered, completed) VALUES ((id IS NOT NULL)::integer, v_n);\n"
        "    END IF;\n"
    )
    if fold_every:
        after_take += (
            f"    IF id % {fold_every} = 0 THEN\n"
            f"        PERFORM {s}.fold({4 * fold_every});\n"
            "    END IF;\n"
        )
    return table(s) + delta_tables(s) + functions(
        s,
        create_count="" if created_from_id else f"    INSERT INTO {s}.delta (created) VALUES (1);\n",
        cd_decl=" v_n integer;",
        after_delete="    GET DIAGNOSTICS v_n = ROW_COUNT;\n",
        after_take=after_take,
    )


def read_c(s="v_c", created_from_id=False):
    parts = []
    for c in COUNTERS:
        if c == "created" and created_from_id:
            parts.append(f"(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {s}.m_id_seq) AS created")
        else:
            parts.append(f"t.{c} + coalesce((SELECT sum(d.{c}) FROM {s}.delta AS d), 0) AS {c}")
    return "SELECT " + ", ".join(parts) + f" FROM {s}.totals AS t"


# --------------------------------- D1: per-backend sharded rows, UPDATE per call
SHARDS = 64


def ddl_d1(s="v_d1"):
    tcols = ", ".join(f"{c} bigint NOT NULL DEFAULT 0" for c in COUNTERS)
    return table(s) + f"""
CREATE TABLE {s}.shard (k integer PRIMARY KEY, {tcols}) WITH (fillfactor = 10);
INSERT INTO {s}.shard (k) SELECT g FROM generate_series(0, {SHARDS - 1}) AS g;
""" + functions(
        s,
        create_count=f"    UPDATE {s}.shard SET created = created + 1 WHERE k = pg_catalog.pg_backend_pid() % {SHARDS};\n",
        cd_decl=" v_n integer;",
        after_delete="    GET DIAGNOSTICS v_n = ROW_COUNT;\n",
        after_take=(
            "    IF id IS NOT NULL OR v_n > 0 THEN\n"
            f"        UPDATE {s}.shard AS sh SET delivered = sh.delivered + (id IS NOT NULL)::integer,"
            " completed = sh.completed + v_n\n"
            f"        WHERE sh.k = pg_catalog.pg_backend_pid() % {SHARDS};\n"
            "    END IF;\n"
        ),
    )


def read_d1(s="v_d1"):
    return "SELECT " + ", ".join(f"sum({c}) AS {c}" for c in COUNTERS) + f" FROM {s}.shard"


# name -> (title, ddl, read sql, schema, periodic fold?)
VARIANTS = {
    "A": ("A floor, no counters", ddl_a("v_a"), None, "v_a", False),
    "B": ("B nextval per event (3 seq calls/msg)", ddl_b("v_b"), read_b("v_b"), "v_b", False),
    "C1": ("C delta row per call, fold(100000) every 1 s by a 9th client", ddl_c("v_c1"), read_c("v_c1"), "v_c1", True),
    "C2": ("C delta row per call, bounded fold(1024) in complete_dequeue when id % 256 = 0",
           ddl_c("v_c2", fold_every=256), read_c("v_c2"), "v_c2", False),
    "D1": ("D1 sharded rows (pid % 64), UPDATE per call", ddl_d1("v_d1"), read_d1("v_d1"), "v_d1", False),
    "D2": ("D2 created = id seq; nextval per delivered/completed", ddl_b("v_d2", created_from_id=True),
           read_b("v_d2", created_from_id=True), "v_d2", False),
    "D3": ("D3 created = id seq; delta row per complete_dequeue, bounded fold",
           ddl_c("v_d3", fold_every=256, created_from_id=True), read_c("v_d3", created_from_id=True), "v_d3", False),
}


def check_floor():
    """A's SQL is the project's FLOOR_DDL with the schema renamed."""
    import os
    import sys
    sys.dont_write_bytecode = True
    sys.path.insert(0, "/work/main")
    from bench.clients import FLOOR_DDL, FLOOR_SCHEMA
    norm = lambda t: " ".join(t.split())
    theirs = norm(FLOOR_DDL.replace(FLOOR_SCHEMA, "v_a"))
    ours = norm(ddl_a("v_a"))
    # the floor also has dequeue() and complete(), which the worker loop does not call
    for piece in ours.split("CREATE FUNCTION"):
        assert norm(piece) in theirs, piece[:200]
    return True


if __name__ == "__main__":
    print(check_floor())
    for k, v in VARIANTS.items():
        print("-----", k, v[0])
        print(v[1])
