"""Interleaved pgbench rounds of the counter variants (variants.py).

    python bench.py --rounds 4 --seconds 20 [--only A,B] [--out results.jsonl]

Per run: the variant's schema recreated, a backlog of 10,000 ready messages
made by its own create() (C/D3: folded), VACUUM ANALYZE, CHECKPOINT; then
pgbench -n -M prepared -c 8 -j 2 -T S, PGOPTIONS synchronous_commit on/off,
the floor worker script (project's bench/pgbench_worker.py) on that schema.
C1 also runs a 9th pgbench client calling fold(100000) then sleeping 1 s.
After the run: pg_stat_statements per call (mean ms, WAL bytes), counters read
and checked against the queue's rows, dead rows of the counter tables.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True
import psycopg

import variants

HOST, PORT, DB = "/tmp/counters_proto/sock", "56432", "proto"
DSN = f"host={HOST} port={PORT} user=postgres dbname={DB}"
BACKLOG = 10_000
CLIENTS = 8
WORK = "/tmp/counters_proto/work"


def script(schema: str) -> str:
    path = f"{WORK}/{schema}.sql"
    with open(path, "w") as f:
        f.write(
            f"SELECT {schema}.create('\\x00');\n"
            f"SELECT id, num_attempts FROM {schema}.complete_dequeue("
            "ARRAY[:id]::bigint[], ARRAY[:num_attempts]::integer[], 60000) \\gset\n"
        )
    return path


def fold_script(schema: str) -> str:
    path = f"{WORK}/{schema}_fold.sql"
    with open(path, "w") as f:
        f.write(f"SELECT {schema}.fold(100000);\n\\sleep 1 s\n")
    return path


def pgbench_cmd(path, clients, seconds, sync, jobs=2):
    env = {**os.environ, "PGOPTIONS": f"-c synchronous_commit={sync}"}
    cmd = ["pgbench", "-n", "-M", "prepared", "-c", str(clients), "-j", str(jobs), "-T", str(seconds),
           "-D", "id=0", "-D", "num_attempts=0", "-f", path, "-h", HOST, "-p", PORT, "-U", "postgres", DB]
    return cmd, env


def prepare(conn, key):
    title, ddl, read, schema, periodic = variants.VARIANTS[key]
    conn.execute(ddl)
    conn.execute(f"SELECT count({schema}.create('\\x00')) FROM generate_series(1, %s)", (BACKLOG,))
    if "fold" in ddl:
        while conn.execute(f"SELECT {schema}.fold(100000)").fetchone()[0] > 0:
            pass
    conn.execute("VACUUM ANALYZE")
    conn.execute("CHECKPOINT")
    conn.execute("SELECT pg_stat_statements_reset()")
    conn.execute("SELECT pg_stat_reset()")


def after(conn, key, res):
    title, ddl, read, schema, periodic = variants.VARIANTS[key]
    time.sleep(0.6)  # let backends flush their table stats (PG15: >= 1 s apart)
    rows = conn.execute(
        "SELECT query, calls, mean_exec_time, wal_bytes::float8 / nullif(calls, 0), wal_records::float8 / nullif(calls, 0) "
        "FROM pg_stat_statements WHERE query LIKE %s AND calls > 100 ORDER BY query",
        (f"%{schema}.%",)).fetchall()
    res["calls"] = {("create" if ".create(" in q else "complete_dequeue" if "complete_dequeue" in q else "fold"):
                    {"calls": c, "mean_ms": m, "wal_bytes": wb, "wal_records": wr} for q, c, m, wb, wr in rows}
    left = conn.execute(f"SELECT count(*), count(*) FILTER (WHERE is_locked) FROM {schema}.m").fetchone()
    res["rows_left"], res["rows_locked"] = left
    if read:
        t0 = time.perf_counter()
        for _ in range(20):
            vals = conn.execute(read).fetchone()
        res["read_ms"] = (time.perf_counter() - t0) / 20 * 1000
        vals = dict(zip(variants.COUNTERS, (int(v) for v in vals)))
        res["counters"] = vals
        # every created message is either still in m or was completed; every
        # delivery not completed is a locked message still in m
        res["check_created"] = vals["created"] - vals["completed"] - left[0]
        res["check_delivered"] = vals["delivered"] - vals["completed"] - left[1]
    stats = conn.execute(
        "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_live_tup, n_dead_tup, "
        "pg_relation_size(relid) FROM pg_stat_user_tables WHERE schemaname = %s", (schema,)).fetchall()
    res["tables"] = {r[0]: dict(zip(("ins", "upd", "hot_upd", "del", "live", "dead", "bytes"), r[1:])) for r in stats}


def run(key, sync, seconds):
    title, ddl, read, schema, periodic = variants.VARIANTS[key]
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: None)
        prepare(conn, key)
    load0 = open("/proc/loadavg").read().split()[0]
    cmd, env = pgbench_cmd(script(schema), CLIENTS, seconds, sync)
    folder = None
    if periodic:
        fcmd, fenv = pgbench_cmd(fold_script(schema), 1, seconds, sync, jobs=1)
        folder = subprocess.Popen(fcmd, env=fenv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if folder:
        folder.communicate()
    m = re.search(r"^tps = ([0-9.]+)", out.stdout, re.M)
    failed = re.search(r"number of failed transactions: ([0-9]+)", out.stdout)
    if out.returncode != 0 or not m or (failed and int(failed.group(1))):
        raise SystemExit(f"pgbench failed {key}:\n{out.stdout[-1500:]}\n{out.stderr[-1500:]}")
    res = {"variant": key, "sync": sync, "tps": float(m.group(1)), "load1_before": float(load0),
           "load1_after": float(open("/proc/loadavg").read().split()[0]), "t": time.time()}
    with psycopg.connect(DSN, autocommit=True) as conn:
        after(conn, key, res)
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return res


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--only", default=",".join(variants.VARIANTS))
    p.add_argument("--syncs", default="on,off")
    p.add_argument("--out", default="/tmp/counters_proto/results.jsonl")
    a = p.parse_args()
    keys = a.only.split(",")
    syncs = a.syncs.split(",")
    with open(a.out, "a") as f:
        for r in range(a.rounds):
            order = keys[r % len(keys):] + keys[:r % len(keys)]
            for sync in (syncs if r % 2 == 0 else syncs[::-1]):
                for key in order:
                    res = run(key, sync, a.seconds)
                    res["round"] = r + 1
                    f.write(json.dumps(res) + "\n")
                    f.flush()
                    print(f"round {r + 1} sync={sync} {key}: {res['tps']:,.0f} msg/s "
                          f"(load {res['load1_before']}) checks {res.get('check_created')},{res.get('check_delivered')}",
                          flush=True)


if __name__ == "__main__":
    main()
