"""Issue 27's prototypes of the delivery data model, measured side by side
with the plain table, the floor and the installed lonnymq, on one private
cluster in one run (synchronous_commit on, as make bench).

    A   bench/prototypes/positions.sql: a fair position fixed when a message
        becomes ready; marks in sequences behind an epoch guard
    A0  the same without the guard and the marks (the issue's 40-line shape)
    B   bench/prototypes/places.sql: a table of places; the take deletes the
        first place and takes its channel's head

Three measures:
  rate   pgbench, 8 clients, each transaction one message (create; the
         worker's complete-and-take call), backlog 10,000 (1 and 64
         channels) or one message in each of 10,000 channels, interleaved
         rounds; messages per second
  held   one session's worker loop while another holds a REPEATABLE READ
         transaction with an xid: shared buffers of one worker call before
         the hold and after N messages, over a backlog and near empty
  marks  a correctness check of A's marks: 8 clients for 30 s (the worker
         loop, takes that roll back, producers that roll back, producers
         whose transactions span raises), then one session drains the queue:
         every ready message must still be deliverable (none below the
         mark).  Run with the guard (A) and, as the negative control,
         without it (Anoguard: raises that do not wait for writers)

    .venv/bin/python -m bench.prototype_delivery rate [--rounds 3] [--seconds 10] [--kinds floor,lonnymq,A]
    .venv/bin/python -m bench.prototype_delivery held [--messages 20000] [--kinds floor,lonnymq,A]
    .venv/bin/python -m bench.prototype_delivery marks [--seconds 30]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.clients import BASELINE_TABLE, FLOOR_DDL, FLOOR_SCHEMA
from bench.pgbench_worker import SCRIPTS, pgbench
from bench.run import ROOT, Target, log
from bench.scenarios import BASELINE_DDL

CLIENTS = 8
BACKLOG = 10_000
PROTOTYPES = ROOT / "bench" / "prototypes"
GUARD = re.compile(r"^.*/\*__GUARD__\*/.*$\n?", re.M)
SHAPES = {"1ch": 1, "64ch": 64, "10kch": 10_000}


def prototype_sql(kind: str) -> str:
    if kind == "B":
        return (PROTOTYPES / "places.sql").read_text().replace("__SCHEMA__", "proto_b")
    text = (PROTOTYPES / "positions.sql").read_text()
    if kind == "A0":
        text = GUARD.sub("", text)
    elif kind == "Anoguard":  # the negative control of the marks' stress test: raises, no guard
        text = "\n".join(line for line in text.splitlines()
                         if "__GUARD__" not in line or "_raise" in line)
    return text.replace("__SCHEMA__", "proto_" + kind.lower())


# The worker call's two arrays, as pgbench variables or as psycopg parameters.
PGBENCH_ARGS = ("ARRAY[:id]::bigint[]", "ARRAY[:num_attempts]::integer[]")
PSYCOPG_ARGS = ("%s::bigint[]", "%s::integer[]")


def worker_call(kind: str, lock_ms: int = 60_000, args: tuple[str, str] = PGBENCH_ARGS,
                columns: str = "id, num_attempts") -> tuple[str, str]:
    """(create SQL with :c for the channel number, complete-and-take SQL with `args`)."""
    if kind.startswith("lonnymq"):
        create = "SELECT lonnymq.message_create('c' || :c, '\\x00')"
        take = "lonnymq.message_complete_dequeue"
    elif kind == "floor":
        create = f"SELECT {FLOOR_SCHEMA}.create('\\x00')"
        take = f"{FLOOR_SCHEMA}.complete_dequeue"
    else:
        create = f"SELECT proto_{kind.lower()}.create('c' || :c, '\\x00')"
        take = f"proto_{kind.lower()}.complete_dequeue"
    return create, f"SELECT {columns} FROM {take}({args[0]}, {args[1]}, {lock_ms})"


def rate_script(kind: str, channels: int) -> str:
    """The pgbench script of `rate`: one transaction = one message, producers
    picking one of `channels` channels at random."""
    if kind == "amo":
        return SCRIPTS["amo"]
    create, take = worker_call(kind)
    return f"\\set c random(1, {channels})\n{create};\n{take} \\gset\n"


def reset(conn, kind: str, channels: int, backlog: int) -> None:
    """An empty queue of this kind, then its backlog spread over `channels`."""
    if kind == "amo":
        conn.execute(f"DROP TABLE IF EXISTS {BASELINE_TABLE}")
        for stmt in BASELINE_DDL.strip().split(";"):
            if stmt.strip():
                conn.execute(stmt)
        conn.execute(f"INSERT INTO {BASELINE_TABLE} (created_us, payload) "
                     "SELECT 0, '\\x00' FROM generate_series(1, %s)", (backlog,))
    elif kind == "floor":
        conn.execute(FLOOR_DDL)
        conn.execute(f"SELECT count({FLOOR_SCHEMA}.create('\\x00')) FROM generate_series(1, %s)", (backlog,))
    elif kind.startswith("lonnymq"):
        # lonnymq@X.Y.Z: that installed version (reached through the
        # installed upgrade scripts), for an A/B on one server.
        version = kind.partition("@")[2]
        conn.execute("DROP EXTENSION IF EXISTS lonnymq CASCADE")
        conn.execute("CREATE EXTENSION lonnymq" + (f" VERSION '{version}'" if version else ""))
        conn.execute("SELECT count(lonnymq.message_create('c' || (g %% %s + 1), '\\x00')) "
                     "FROM generate_series(1, %s) AS g", (channels, backlog))
    else:
        conn.execute(prototype_sql(kind))
        conn.execute(f"SELECT count(proto_{kind.lower()}.create('c' || (g %% %s + 1), '\\x00')) "
                     "FROM generate_series(1, %s) AS g", (channels, backlog))
    conn.execute("VACUUM ANALYZE")
    conn.execute("CHECKPOINT")


def rate(args) -> list[str]:
    kinds = args.kinds.split(",") if args.kinds else ["amo", "floor", "lonnymq", "A", "A0", "B"]
    plan = [("1ch", k) for k in kinds]
    plan += [(s, k) for s in ("64ch", "10kch") for k in kinds if k not in ("amo", "floor")]
    rates: dict[tuple[str, str], list[float]] = {p: [] for p in plan}
    target = Target()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            target.start()
            for r in range(args.rounds):
                for shape, kind in plan:
                    n = SHAPES[shape]
                    script = Path(tmp) / f"{kind.replace('@', '_')}-{shape}.sql"  # (pgbench reads file@weight)
                    script.write_text(rate_script(kind, n))
                    with target.connect() as conn:
                        reset(conn, kind, n, BACKLOG)
                    rates[(shape, kind)].append(pgbench(target, script, args.seconds))
                    log(f"  [round {r + 1}/{args.rounds}] {shape} {kind}: {rates[(shape, kind)][-1]:,.0f} msg/s")
        finally:
            target.stop()
    med = {p: statistics.median(v) for p, v in rates.items()}
    floor = med[("1ch", "floor")]
    lines = [
        f"pgbench, {CLIENTS} clients, {args.seconds:g} s per run, {args.rounds} interleaved rounds, "
        "synchronous_commit on; backlog 10,000 (1ch, 64ch) or one message in each of 10,000 channels "
        "(10kch); producers pick a channel at random.\n",
        "| shape | loop | " + " | ".join(f"round {i + 1}" for i in range(args.rounds))
        + " | median msg/s | × floor | × its 1ch |",
        "|---|---|" + "---|" * args.rounds + "---|---|---|",
    ]
    for shape, kind in plan:
        vals = rates[(shape, kind)]
        one = med.get(("1ch", kind))
        lines.append(f"| {shape} | {kind} | " + " | ".join(f"{v:,.0f}" for v in vals)
                     + f" | {med[(shape, kind)]:,.0f} | {med[(shape, kind)] / floor:.2f}"
                     + f" | {med[(shape, kind)] / one:.2f} |" if one else " | |")
    return lines


def call_buffers(conn, kind: str, messages_ids: list[int], tokens: list[int]) -> int:
    _create, sql = worker_call(kind, lock_ms=1000, args=PSYCOPG_ARGS, columns="*")
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, (messages_ids, tokens)).fetchone()[0]
    top = plan[0]["Plan"]
    return top["Shared Hit Blocks"] + top["Shared Read Blocks"]


def held(args) -> list[str]:
    kinds = (args.kinds or "floor,lonnymq,A,A0,B").split(",")
    lines = [
        f"One session: create; worker call, {args.messages:,} messages, while another session holds a "
        "REPEATABLE READ transaction with an xid; locks of 1 s.  Shared buffers of one worker call "
        "(median of 5), before the hold and after it.\n",
        "| kind | backlog | channels | before | after | × |",
        "|---|---|---|---|---|---|",
    ]
    target = Target()
    try:
        target.start()
        for backlog in (10, BACKLOG):
            for channels in (1, 64):
                for kind in kinds:
                    if kind == "floor" and channels > 1:
                        continue
                    with target.connect() as conn:
                        reset(conn, kind, channels, backlog)
                        # Locks of 1 s: their expiries fall behind the clock during the
                        # run, so the due probe's range holds the completed ones.
                        create, take = worker_call(kind, lock_ms=1000, args=PSYCOPG_ARGS)

                        def loop(n: int) -> None:
                            ids, toks = [], []
                            for i in range(n):
                                conn.execute(create.replace(":c", str(i % channels + 1)))
                                row = conn.execute(take, (ids, toks)).fetchone()
                                ids, toks = ([row[0]], [row[1]]) if row and row[0] is not None else ([], [])

                        loop(2000)
                        before = statistics.median(call_buffers(conn, kind, [], []) for _ in range(5))
                        with target.connect() as holder:
                            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                            holder.execute("SELECT txid_current(), count(*) FROM pg_class")
                            loop(args.messages)
                            after = statistics.median(call_buffers(conn, kind, [], []) for _ in range(5))
                            holder.execute("ROLLBACK")
                    lines.append(f"| {kind} | {backlog:,} | {channels} | {before:,.0f} | {after:,.0f} | "
                                 f"{after / max(before, 1):.1f} |")
                    log(lines[-1])
    finally:
        target.stop()
    return lines


def marks(args) -> list[str]:
    lines = [
        f"8 clients, {args.seconds:g} s, 64 channels: the worker loop (weight 8), takes that roll back, "
        "producers that roll back, producers holding their transaction 50 ms between two creates "
        "(weight 1 each); then one session takes until nothing is ready.\n",
        "| prototype | ready after the run | ready below the mark | taken by the drain | ready but never taken |",
        "|---|---|---|---|---|",
    ]
    target = Target()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            target.start()
            for kind in ("A", "Anoguard"):
                s = "proto_" + kind.lower()
                take = f"SELECT id, num_attempts FROM {s}.complete_dequeue"
                scripts = {
                    "loop": (8, f"\\set c random(1, 64)\nSELECT {s}.create('c' || :c, '\\x00');\n"
                                f"{take}(ARRAY[:id]::bigint[], ARRAY[:num_attempts]::integer[], 60000) \\gset\n"),
                    "rollback_take": (1, f"BEGIN;\n{take}('{{}}'::bigint[], '{{}}'::integer[], 60000);\nROLLBACK;\n"),
                    "slow_producer": (1, f"\\set c random(1, 64)\nBEGIN;\nSELECT {s}.create('c' || :c, '\\x00');\n"
                                         f"SELECT pg_sleep(0.05);\nSELECT {s}.create('c' || :c, '\\x00');\nCOMMIT;\n"),
                    "rollback_producer": (1, f"\\set c random(1, 64)\nBEGIN;\nSELECT {s}.create('c' || :c, '\\x00');\n"
                                             "ROLLBACK;\n"),
                }
                files = []
                for name, (weight, text) in scripts.items():
                    path = Path(tmp) / f"{kind}-{name}.sql"
                    path.write_text(text)
                    files += ["-f", f"{path}@{weight}"]
                with target.connect() as conn:
                    reset(conn, kind, 64, 200)
                c = target.cluster
                out = subprocess.run(
                    ["pgbench", "-n", "-c", str(CLIENTS), "-j", "2", "-T", str(int(args.seconds)),
                     "-D", "id=0", "-D", "num_attempts=0", *files,
                     "-h", str(c.socket_dir), "-p", str(c.port), "-U", c.superuser, "lonnymq_bench"],
                    capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(out.stdout[-1500:] + out.stderr[-1500:])
                with target.connect() as conn:
                    mark = conn.execute(f"SELECT last_value FROM {s}.position_mark_seq").fetchone()[0]
                    ready, below = conn.execute(
                        f"SELECT count(*), count(*) FILTER (WHERE position < %s) FROM {s}.m WHERE NOT is_locked",
                        (mark,)).fetchone()
                    drained = 0
                    while conn.execute(f"{take}('{{}}'::bigint[], '{{}}'::integer[], 60000)").fetchone()[0]:
                        drained += 1
                    left = conn.execute(f"SELECT count(*) FROM {s}.m WHERE NOT is_locked").fetchone()[0]
                lines.append(f"| {kind} | {ready:,} | {below:,} | {drained:,} | {left:,} |")
                log(lines[-1])
        finally:
            target.stop()
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("measure", choices=("rate", "held", "marks"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--kinds", help="the loops to measure (rate: amo,floor,lonnymq,A,A0,B; held: floor,lonnymq,A,A0,B)")
    p.add_argument("--out")
    args = p.parse_args()
    lines = {"rate": rate, "held": held, "marks": marks}[args.measure](args)
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
