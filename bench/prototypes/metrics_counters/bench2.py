"""Paired A/X runs (ABBA order) with server CPU per message.

For each candidate X and sync setting: rounds of (A, X) then (X, A), ...;
each run as bench.run (fresh backlog, pgbench 8 clients) but also samples,
at 2 s and at T-1 s, the CPU time (utime+stime, /proc) of every pgbench
backend and the calls of complete_dequeue in pg_stat_statements: server CPU
ms per message over that window, a cost measure less sensitive to the
other engineer's load than msg/s.

    python bench2.py --pairs 3 --seconds 12 B D2 C2 D3
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
import psycopg

import bench
import variants

TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pids):
    s = 0
    for p in pids:
        try:
            f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            s += int(f[11]) + int(f[12])
        except OSError:
            pass
    return s / TICK


def sample(conn, schema):
    pids = [r[0] for r in conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND datname = current_database()")]
    calls = conn.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE %s",
                         (f"%{schema}.complete_dequeue%",)).fetchone()[0]
    busy = open("/proc/stat").readline().split()[1:8]
    busy = sum(int(busy[i]) for i in (0, 1, 2, 5, 6)) / TICK
    return time.monotonic(), pids, cpu_of(pids), int(calls), busy


def run(key, sync, seconds):
    title, ddl, read, schema, periodic = variants.VARIANTS[key]
    with psycopg.connect(bench.DSN, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: None)
        bench.prepare(conn, key)
    cmd, env = bench.pgbench_cmd(bench.script(schema), bench.CLIENTS, seconds, sync)
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    if periodic:
        fcmd, fenv = bench.pgbench_cmd(bench.fold_script(schema), 1, seconds, sync, jobs=1)
        procs.append(subprocess.Popen(fcmd, env=fenv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    with psycopg.connect(bench.DSN, autocommit=True) as conn:
        time.sleep(2)
        t0, pids, c0, n0, b0 = sample(conn, schema)
        time.sleep(seconds - 3)
        t1, _, c1, n1, b1 = sample(conn, schema)
        c1 = cpu_of(pids)
    outs = [p.communicate() for p in procs]
    m = re.search(r"^tps = ([0-9.]+)", outs[0][0], re.M)
    if procs[0].returncode or not m:
        raise SystemExit(f"pgbench failed {key}: {outs[0]}")
    with psycopg.connect(bench.DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return {"variant": key, "sync": sync, "tps": float(m.group(1)), "window_msgs": n1 - n0,
            "window_tps": (n1 - n0) / (t1 - t0), "cpu_ms_per_msg": (c1 - c0) / (n1 - n0) * 1000,
            "machine_busy_frac": (b1 - b0) / (t1 - t0) / os.cpu_count(), "backends": len(pids)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--seconds", type=int, default=12)
    p.add_argument("--syncs", default="off,on")
    p.add_argument("--out", default="/tmp/counters_proto/pairs.jsonl")
    p.add_argument("keys", nargs="+")
    a = p.parse_args()
    with open(a.out, "a") as f:
        for key in a.keys:
            for sync in a.syncs.split(","):
                for i in range(a.pairs):
                    for k in (("A", key) if i % 2 == 0 else (key, "A")):
                        r = run(k, sync, a.seconds)
                        r["pair_of"], r["pair"] = key, i + 1
                        f.write(json.dumps(r) + "\n")
                        f.flush()
                        print(f"{key} sync={sync} pair {i + 1} {k}: {r['tps']:,.0f} msg/s, "
                              f"{r['cpu_ms_per_msg']:.3f} CPU ms/msg, machine busy {r['machine_busy_frac']:.0%}",
                              flush=True)


if __name__ == "__main__":
    main()
