"""Per-message counts on one backend (as the project's bench/plan_counts.py):
plan nodes initialised, expressions, SPI statements, executor starts,
PL/pgSQL calls (the uprobes already defined on this machine), plus
instructions if the VM exposes them; WAL bytes/records per message from
pg_stat_statements.  Synchronous_commit off, plans cached (200 warm-up loops).

    python count.py [--messages 3000] [A B ...]
"""
import argparse
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
import psycopg

import bench
import variants

EVENTS = {
    "plan nodes": "probe_postgres:ExecInitNode",
    "expressions": "probe_postgres:ExecInitExprWithParams",
    "statements": "probe_postgres:SPI_execute_plan_with_paramlist",
    "executor starts": "probe_postgres:standard_ExecutorStart",
    "PL/pgSQL calls": "probe_plpgsql:plpgsql_call_handler",
    "instructions": "instructions:u",
}


def count(key, messages):
    schema = variants.VARIANTS[key][3]
    with psycopg.connect(bench.DSN, autocommit=True) as conn:
        bench.prepare(conn, key)
    with psycopg.connect(bench.DSN, autocommit=True, prepare_threshold=0) as conn:
        conn.execute("SET synchronous_commit = off")
        cur = conn.cursor()
        held = ([], [])
        c_sql = f"SELECT {schema}.create('\\x00'::bytea)"
        cd_sql = f"SELECT d.id, d.num_attempts FROM {schema}.complete_dequeue(%s::bigint[], %s::integer[], 60000) AS d"

        def step():
            nonlocal held
            cur.execute(c_sql)
            cur.execute(cd_sql, held)
            r = cur.fetchall()
            held = ([x[0] for x in r], [x[1] for x in r])

        for _ in range(200):
            step()
        wal0 = conn.execute("SELECT wal_records, wal_bytes FROM pg_stat_wal").fetchone()
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(EVENTS.values()), "-p",
                                 str(conn.info.backend_pid)], stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        for _ in range(messages):
            step()
        time.sleep(0.2)
        perf.send_signal(signal.SIGINT)
        err = perf.communicate()[1]
        time.sleep(1.1)  # pg_stat_wal is flushed by the backend at most once a second
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")
        wal1 = conn.execute("SELECT wal_records, wal_bytes FROM pg_stat_wal").fetchone()
    got = {}
    for line in err.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].isdigit():
            got[f[2]] = int(f[0]) / messages
    out = {name: got.get(ev, float("nan")) for name, ev in EVENTS.items()}
    out["WAL records"] = (wal1[0] - wal0[0]) / messages
    out["WAL bytes"] = float(wal1[1] - wal0[1]) / messages
    with psycopg.connect(bench.DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--messages", type=int, default=3000)
    p.add_argument("keys", nargs="*", default=list(variants.VARIANTS))
    a = p.parse_args()
    cols = list(EVENTS) + ["WAL records", "WAL bytes"]
    print("| variant | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    for key in a.keys:
        c = count(key, a.messages)
        print(f"| {key} | " + " | ".join(f"{c[k]:,.1f}" if k != "instructions" else f"{c[k]:,.0f}" for k in cols) + " |",
              flush=True)


if __name__ == "__main__":
    main()
