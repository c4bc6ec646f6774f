"""The worker loop measured as the issue that asked for it measured it: with
pgbench (a C client, prepared statements) rather than Python clients.

The at-most-once table (INSERT; DELETE ... SKIP LOCKED), the floor worker
loop (two minimal PL/pgSQL calls, bench/clients.py's FLOOR_DDL), lonnymq's
worker loop (message_create; message_complete_dequeue) and lonnymq's
three-call lifecycle, each on a standing backlog of 10,000 ready messages,
8 clients, in interleaved rounds, on a private cluster with
synchronous_commit on (as make bench; --sync off for the other).  One pgbench transaction is one
message.  Writes bench/results/<name>.md: msg/s per round, the medians and
their ratios to the at-most-once median.

    .venv/bin/python -m bench.pgbench_worker [--rounds 3] [--seconds 20] [--name NAME]
        [--majors 15,18] [--loops floor_worker,worker_1ch] [--sync off]

--majors runs the loops on a private cluster of each PostgreSQL major
(lonnymq_dev/pgservers.py: Debian's 15, the pinned builds of the others, each
with lonnymq installed by `make install-system PG=N`), all in the same
interleaved rounds, and reports each major's ratios.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path

from bench.clients import BASELINE_TABLE, FLOOR_SCHEMA
from bench.run import ROOT, Target, log
from bench.scenarios import fresh_backlog

BACKLOG = 10_000
CLIENTS = 8
# One pgbench transaction = one message.  :id and :num_attempts carry the
# last delivery from one transaction of a client to its next (-D sets the
# first, which completes nothing).
# 16 channels, each message into one at random; with _limited, each has
# max_concurrency 4 (64 locks at once for 8 clients: the limit never binds,
# so what differs is what a limit costs).  One row whether or not the take
# delivered (an admission that lags leaves a take empty, which would stop
# pgbench's \gset; the next transaction then completes nothing), and what is
# reported is what was consumed: transactions less the backlog's growth.
WORKER_16CH = (
    "\\set c random(0, 15)\n"
    "SELECT lonnymq.message_create('bench' || :c, '\\x00');\n"
    "SELECT coalesce(max(id), 0) AS id, coalesce(max(num_attempts), 0) AS num_attempts "
    "FROM lonnymq.message_complete_dequeue(ARRAY[:id]::bigint[], ARRAY[:num_attempts]::integer[], 60000) \\gset\n"
)
SCRIPTS = {
    "amo": (
        f"INSERT INTO {BASELINE_TABLE} (created_us, payload) VALUES (0, '\\x00');\n"
        f"DELETE FROM {BASELINE_TABLE} WHERE id = (SELECT id FROM {BASELINE_TABLE} "
        "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id;\n"
    ),
    "floor_worker": (
        f"SELECT {FLOOR_SCHEMA}.create('\\x00');\n"
        f"SELECT id, num_attempts FROM {FLOOR_SCHEMA}.complete_dequeue("
        "ARRAY[:id]::bigint[], ARRAY[:num_attempts]::integer[], 60000) \\gset\n"
    ),
    "worker_1ch": (
        "SELECT lonnymq.message_create('bench', '\\x00');\n"
        "SELECT id, num_attempts FROM lonnymq.message_complete_dequeue("
        "ARRAY[:id]::bigint[], ARRAY[:num_attempts]::integer[], 60000) \\gset\n"
    ),
    # (The limited loop's channels get their limit in scenarios.fresh_backlog.)
    "worker_16ch": WORKER_16CH,
    "worker_16ch_limited": WORKER_16CH,
    "lifecycle_1ch": (
        "SELECT lonnymq.message_create('bench', '\\x00');\n"
        "SELECT id, num_attempts FROM lonnymq.message_dequeue(60000) \\gset\n"
        "SELECT lonnymq.message_complete(:id, :num_attempts);\n"
    ),
}
TITLES = {
    "amo": "at-most-once plain table: INSERT; DELETE … SKIP LOCKED (2 commits)",
    "floor_worker": "floor worker loop: two minimal PL/pgSQL calls (2 commits)",
    "worker_1ch": "lonnymq worker loop, one channel: create; message_complete_dequeue (2 commits)",
    "lifecycle_1ch": "lonnymq lifecycle, one channel: create; dequeue; complete (3 commits)",
    "worker_16ch": "lonnymq worker loop, 16 channels (2 commits)",
    "worker_16ch_limited": "lonnymq worker loop, 16 channels with max_concurrency 4 (2 commits)",
}


def pgbench(target: Target, script: Path, seconds: float, *, dbname: str = "lonnymq_bench",
            defines: tuple[str, ...] = ("id=0", "num_attempts=0"), options: str | None = None) -> float:
    """tps of one pgbench run; options: PGOPTIONS for the clients' sessions
    (e.g. "-c synchronous_commit=off")."""
    c = target.cluster
    env = {**os.environ, "PGOPTIONS": options} if options else None
    own = c.bindir / "pgbench" if c is not None else None  # the server's own build, else Debian's
    out = subprocess.run(
        [str(own) if own and own.exists() else "pgbench", "-n", "-M", "prepared", "-c", str(CLIENTS), "-j", "2", "-T", str(int(seconds)),
         *(a for d in defines for a in ("-D", d)), "-f", str(script),
         "-h", str(c.socket_dir), "-p", str(c.port), "-U", c.superuser, dbname],
        capture_output=True, text=True, env=env,
    )
    m = re.search(r"^tps = ([0-9.]+)", out.stdout, re.M)
    failed = re.search(r"number of failed transactions: ([0-9]+)", out.stdout)
    if out.returncode != 0 or not m or (failed and int(failed.group(1))):
        raise SystemExit(f"pgbench failed ({script.name}):\n{out.stdout[-1500:]}\n{out.stderr[-1500:]}")
    return float(m.group(1))


def main() -> int:
    from lonnymq_dev import pgservers

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--majors", help="PostgreSQL majors, e.g. 15,18 (default: $PG_CONFIG's server)")
    p.add_argument("--loops", default=",".join(SCRIPTS), help=f"loops to run (default {','.join(SCRIPTS)})")
    p.add_argument("--name", default=datetime.now().strftime("%Y-%m-%d") + "-pgbench-worker")
    p.add_argument("--sync", choices=("on", "off"), default="on",
                   help="the clients' synchronous_commit (default on, as users run)")
    args = p.parse_args()
    loops = args.loops.split(",")
    majors = [int(m) for m in args.majors.split(",")] if args.majors else [None]
    targets = {m: Target(pg_config=str(pgservers.pg_config(m)) if m else None) for m in majors}
    rates: dict[tuple, list[float]] = {(m, k): [] for m in majors for k in loops}
    versions: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {}
        for key in loops:
            scripts[key] = Path(tmp) / f"{key}.sql"
            scripts[key].write_text(SCRIPTS[key])
        try:
            for m, target in targets.items():
                target.start()
                with target.connect() as conn:
                    versions[m] = conn.execute(
                        "SELECT current_setting('synchronous_commit'), version()").fetchone()
            for r in range(args.rounds):
                for m, target in targets.items():
                    for key in loops:
                        counted = key.startswith("worker_16ch")
                        with target.connect() as conn:
                            fresh_backlog(conn, key, BACKLOG)
                            conn.execute("CHECKPOINT")
                            before = conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0] if counted else 0
                        tps = pgbench(target, scripts[key], args.seconds,
                                      options=f"-c synchronous_commit={args.sync} -c client_min_messages=warning")
                        if counted:
                            with target.connect() as conn:
                                tps -= (conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0] - before) / args.seconds
                        rates[(m, key)].append(tps)
                        log(f"  [round {r + 1}/{args.rounds}] {m or ''} {key}: {rates[(m, key)][-1]:,.0f} msg/s")
        finally:
            for target in targets.values():
                target.stop()
    med = {k: statistics.median(v) for k, v in rates.items()}
    first = versions[majors[0]]
    lines = [
        f"# The worker loop with pgbench — {args.name}\n",
        f"`bench/pgbench_worker.py`: {CLIENTS} clients, `pgbench -M prepared`, {args.seconds:g} s per run, "
        f"{args.rounds} interleaved rounds, a standing backlog of {BACKLOG:,} ready messages, "
        f"synchronous_commit {args.sync} (the server's default {first[0]}); "
        + "; ".join(v[1].split(",")[0] for v in versions.values())
        + ". One pgbench transaction is one message (its create and its consumption).\n",
        "| server | loop | " + " | ".join(f"round {i + 1}" for i in range(args.rounds))
        + " | median msg/s | × floor |",
        "|---|---|" + "---|" * args.rounds + "---|---|",
    ]
    for (m, key), vals in rates.items():
        floor = med.get((m, "floor_worker"))
        ratio = f"{med[(m, key)] / floor:.2f}" if floor else ""
        lines.append(f"| {versions[m][1].split(' on ')[0]} | {TITLES[key]} | " + " | ".join(f"{v:,.0f}" for v in vals)
                     + f" | {med[(m, key)]:,.0f} | {ratio} |")
    for m in majors:
        if (m, "worker_1ch") in med and (m, "floor_worker") in med:
            lines.append(f"\n{versions[m][1].split(' on ')[0]}: lonnymq's worker loop "
                         f"{med[(m, 'worker_1ch')]:,.0f} msg/s, the floor's {med[(m, 'floor_worker')]:,.0f}: "
                         f"{med[(m, 'worker_1ch')] / med[(m, 'floor_worker')]:.2f} × the floor.")
    out = ROOT / "bench" / "results" / f"{args.name}.md"
    out.write_text("\n".join(lines) + "\n")
    log(f"report: {out}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
