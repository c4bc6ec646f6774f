"""What one message costs in the backend, counted rather than timed: plan
nodes initialised, PL/pgSQL expressions prepared, SPI statements run and
PL/pgSQL calls made, per message of a loop, on one backend of a private
cluster (synchronous_commit off).  CPU time on a shared machine varies by
10% or more from run to run; these counts are exact and repeatable, so a
change to the hot path can be judged by them before it is timed.

Uprobes on the server's binaries (`perf probe`), read with `perf stat`:
needs root and perf.  The loops: `worker` (message_create;
message_complete_dequeue, one channel), `lifecycle` (create; dequeue;
complete), `floor_worker` (the floor worker loop of bench/clients.py),
`amo` (the at-most-once table), and the worker loop on a configured
channel, `configured` (a row without a limit) and `limited`
(max_concurrency 4, never reached), each on a backlog of 10,000 messages.

    .venv/bin/python -m bench.plan_counts [--messages 2000] [--version 0.11.2] [worker lifecycle floor_worker amo]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import subprocess
import time

import psycopg

from bench.clients import BASELINE_TABLE, FLOOR_SCHEMA
from bench.run import Target, log
from bench.pgbench_worker import BACKLOG
from bench.scenarios import fresh_backlog

# (binary, function): what each count is.
PROBES = {
    "plan nodes": ("bin/postgres", "ExecInitNode"),
    "expressions": ("bin/postgres", "ExecInitExprWithParams"),
    "statements": ("bin/postgres", "SPI_execute_plan_with_paramlist"),
    "executor starts": ("bin/postgres", "standard_ExecutorStart"),
    "PL/pgSQL calls": ("lib/plpgsql.so", "plpgsql_call_handler"),
}
LOOPS = {
    "worker": [
        ("SELECT lonnymq.message_create('bench', '\\x00'::bytea)", None),
        ("SELECT d.id, d.num_attempts FROM lonnymq.message_complete_dequeue(%s::bigint[], %s::integer[], 60000) AS d",
         "held"),
    ],
    "lifecycle": [
        ("SELECT lonnymq.message_create('bench', '\\x00'::bytea)", None),
        ("SELECT d.id, d.num_attempts FROM lonnymq.message_dequeue(60000) AS d", "take"),
        ("SELECT lonnymq.message_complete(%s, %s)", "one"),
    ],
    "floor_worker": [
        (f"SELECT {FLOOR_SCHEMA}.create('\\x00'::bytea)", None),
        (f"SELECT d.id, d.num_attempts FROM {FLOOR_SCHEMA}.complete_dequeue(%s::bigint[], %s::integer[], 60000) AS d",
         "held"),
    ],
    "amo": [
        (f"INSERT INTO {BASELINE_TABLE} (created_us, payload) VALUES (0, '\\x00')", None),
        (f"DELETE FROM {BASELINE_TABLE} WHERE id = (SELECT id FROM {BASELINE_TABLE} "
         "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id", None),
    ],
}


# The worker loop on a configured channel: a row without a limit (the
# completion's follow-up probes), and max_concurrency 4, which one backend
# never reaches (admission by promotion: issue 40's limits).
CHANNEL_SETS = {
    "configured": "SELECT lonnymq.channel_set('bench', p_max_attempts => 5)",
    "limited": "SELECT lonnymq.channel_set('bench', p_max_concurrency => 4)",
}
LOOPS.update({loop: LOOPS["worker"] for loop in CHANNEL_SETS})


def probes() -> list[str]:
    """Define the uprobes on the binaries of $PG_CONFIG (else pg_config on
    PATH), the server the clusters run (lonnymq_dev/pgcluster.py), once per
    machine and installation (an event per installation, named with a hash
    of its path: the same function of two installations is two probes), and return their perf event names."""
    pg_config = os.environ.get("PG_CONFIG") or "pg_config"
    bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
    root = os.path.dirname(os.path.realpath(bindir))
    suffix = hashlib.sha1(root.encode()).hexdigest()[:8]
    events = []
    for binary, func in PROBES.values():
        path = os.path.join(root, binary)
        group = "probe_plpgsql" if binary.endswith(".so") else "probe_postgres"
        subprocess.run(["perf", "probe", "-q", "-x", path, "-a", f"{group}:{func}_{suffix}={func}"],
                       capture_output=True)
        events.append(f"{group}:{func}_{suffix}")
    return events


def count(target: Target, loop: str, messages: int, events: list[str], version: str | None = None) -> dict:
    with target.connect() as conn:
        fresh_backlog(conn, loop, BACKLOG, version)
        if loop in CHANNEL_SETS:
            conn.execute(CHANNEL_SETS[loop])
    with psycopg.connect(target.dsn, autocommit=True, prepare_threshold=0) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.add_notice_handler(lambda d: None)
        cur = conn.cursor()
        state: dict = {"held": [], "take": []}

        def step() -> None:
            for sql, arg in LOOPS[loop]:
                if arg == "held":
                    cur.execute(sql, ([h[0] for h in state["held"]], [h[1] for h in state["held"]]))
                    state["held"] = cur.fetchall()
                elif arg == "take":
                    cur.execute(sql)
                    state["take"] = cur.fetchall()
                elif arg == "one":
                    cur.execute(sql, state["take"][0])
                else:
                    cur.execute(sql)

        for _ in range(200):  # plans cached, as in a long-running worker
            step()
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(events), "-p", str(conn.info.backend_pid)],
                                stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        for _ in range(messages):
            step()
        time.sleep(0.2)
        perf.send_signal(signal.SIGINT)
        err = perf.communicate()[1]
    got = {}
    for line in err.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].isdigit():
            got[f[2]] = int(f[0]) / messages
    return {name: got.get(event, float("nan")) for name, event in zip(PROBES, events)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=2000)
    p.add_argument("--version", help="an older installed version of lonnymq to count instead of the default")
    p.add_argument("loops", nargs="*", default=list(LOOPS))
    args = p.parse_args()
    events = probes()
    target = Target()
    rows = []
    try:
        target.start()
        for loop in args.loops:
            rows.append((loop, count(target, loop, args.messages, events, args.version)))
            log(f"  {loop}: " + ", ".join(f"{k} {v:.1f}" for k, v in rows[-1][1].items()))
    finally:
        target.stop()
    print("\n| loop | " + " | ".join(PROBES) + " |\n|---|" + "---|" * len(PROBES))
    for loop, c in rows:
        print(f"| {loop} | " + " | ".join(f"{v:.1f}" for v in c.values()) + " |")
    print(f"\nper message, {args.messages} messages, one backend, lonnymq {args.version or 'as installed by default'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
