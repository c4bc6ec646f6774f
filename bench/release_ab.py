"""The release's performance claims, side by side on one private cluster in
one run: the installed lonnymq (the build) against an older installed
version, the plain table, the floor and PGMQ.

  1. worker loop (pgbench, one transaction = one message: create; take and
     complete), standing backlog 10,000: plain table (amo), floor, PGMQ (one
     queue), lonnymq@OLD and lonnymq on 1ch, 64ch, 10kch
  2. batches of 100 (one transaction = 100 messages): plain table, PGMQ,
     lonnymq@OLD, lonnymq
     Items 1 and 2 run in interleaved rounds (round r runs every loop once),
     with synchronous_commit on, then again in a second pass with it off
     (PGOPTIONS in the pgbench sessions).
  3. eight psycopg clients draining 4,000 ready messages of one channel
     (dequeue, then complete, until nothing is left) against the plain table
     drained by DELETE ... SKIP LOCKED the same way
  4. one million channels (one message in each): the worker loop against
     the same loop on one channel, EXPLAIN buffers of create / dequeue /
     complete at a million channels and at one, then a full drain and
     lonnymq.channel's row count; optionally the old version at
     --old-channels channels

Before every measured pgbench run or drain it waits while `pgrep -f
"pytest|pg_prove"` finds a test run (polling every 15 s) and reports the
total wait; a run during which a test suite starts (polled every second)
is discarded and redone (at most twice).  --budget MINUTES skips the
sync-off rounds that would end after it, then item 4's old version.  PGMQ is installed as a SQL-only extension (pgmq.control and
pgmq--VERSION.sql written into `pg_config --sharedir`/extension, root
needed) from --pgmq-sql, or from pgmq-extension/sql/pgmq.sql of a git
checkout (--pgmq-git), when it is not installed already.

Every figure goes to bench/results/<name>.json as it is measured; the
report, bench/results/<name>.md, is written from it (--report-only rewrites
it from the JSON).

    .venv/bin/python -m bench.release_ab [--rounds 3] [--rounds-off 3] [--seconds 10] [--old 0.10.1]
        [--million 1000000] [--old-channels 100000] [--name NAME]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import signal
import sys
import statistics
import subprocess
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import psycopg

from bench.clients import BASELINE_TABLE, FLOOR_DDL, FLOOR_SCHEMA
from bench.pgbench_worker import SCRIPTS, pgbench
from bench.run import ROOT, Target, log
from bench.scenarios import BASELINE_DDL
from lonnymq_dev import calls

CLIENTS = 8
BACKLOG = 10_000
# Item 1's shapes: one channel, 64, and one message in each of 10,000.
SHAPES = {"1ch": 1, "64ch": 64, "10kch": 10_000}
DRAIN_MESSAGES = 4_000
BATCH = 100
SYNC_OFF = "-c synchronous_commit=off"
PGMQ_QUEUE = "bench"
# Item 4 creates its channels' messages in statements of this many: each
# message_create holds an advisory lock on its channel to the end of the
# transaction, so one transaction over 50,000 new channels runs out of the
# lock table (max_locks_per_transaction 64 x 100 connections).
CREATE_CHUNK = 2_000

# ----------------------------------------------------------------- the loops

# PGMQ's worker loop: send; then, in one transaction (one commit, as the
# floor's and lonnymq's complete-and-take call), delete what the previous
# transaction read and read the next (visibility timeout 60 s, as the others'
# 60,000 ms locks).  Two commits per message, like the others.
PGMQ_WORKER = (
    f"SELECT count(*) FROM pgmq.send('{PGMQ_QUEUE}', '{{}}'::jsonb);\n"
    "BEGIN;\n"
    f"SELECT pgmq.delete('{PGMQ_QUEUE}', :id::bigint);\n"
    f"SELECT msg_id AS id FROM pgmq.read('{PGMQ_QUEUE}', 60, 1) \\gset\n"
    "COMMIT;\n"
)
# Batches of 100: one pgbench transaction creates 100, completes the 100 its
# previous transaction took and takes 100.  :ids / :toks carry the arrays.
BATCH_SCRIPTS = {
    "amo": (
        f"INSERT INTO {BASELINE_TABLE} (created_us, payload) SELECT 0, '\\x00' FROM generate_series(1, {BATCH});\n"
        f"DELETE FROM {BASELINE_TABLE} WHERE id = ANY(ARRAY(SELECT id FROM {BASELINE_TABLE} "
        f"ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {BATCH}));\n"
    ),
    "pgmq": (
        f"SELECT count(*) FROM pgmq.send_batch('{PGMQ_QUEUE}', array_fill('{{}}'::jsonb, ARRAY[{BATCH}]));\n"
        "BEGIN;\n"
        f"SELECT count(*) FROM pgmq.delete('{PGMQ_QUEUE}', :ids::bigint[]);\n"
        f"SELECT coalesce(array_agg(msg_id), '{{}}') AS ids FROM pgmq.read('{PGMQ_QUEUE}', 60, {BATCH}) \\gset\n"
        "COMMIT;\n"
    ),
    "lonnymq": (
        f"SELECT count(*) FROM lonnymq.message_create_batch('c1', array_fill('\\x00'::bytea, ARRAY[{BATCH}]));\n"
        "SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(num_attempts), '{}') AS toks "
        f"FROM lonnymq.message_complete_dequeue(:ids::bigint[], :toks::integer[], 60000, {BATCH}) \\gset\n"
    ),
}
BATCH_DEFINES = ("ids={}", "toks={}")


def rate_script(kind: str, channels: int) -> str:
    """Item 1's pgbench script: one transaction = one message (create; the
    complete-and-take call, completing the previous transaction's delivery),
    producers picking one of `channels` channels at random.  kind: amo (the
    plain table's own script), floor, or lonnymq[@OLD]."""
    if kind == "amo":
        return SCRIPTS["amo"]
    if kind == "floor":
        create = f"SELECT {FLOOR_SCHEMA}.create('\\x00')"
        take = f"{FLOOR_SCHEMA}.complete_dequeue"
    else:
        create = "SELECT lonnymq.message_create('c' || :c, '\\x00')"
        take = "lonnymq.message_complete_dequeue"
    return (f"\\set c random(1, {channels})\n{create};\n"
            f"SELECT id, num_attempts FROM {take}(ARRAY[:id]::bigint[], ARRAY[:num_attempts]::integer[], 60000) "
            "\\gset\n")


def reset(conn, kind: str, channels: int, backlog: int) -> None:
    """An empty queue of this kind (amo, floor, lonnymq[@OLD]), then its
    backlog spread over `channels`."""
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
        raise ValueError(f"no queue of kind {kind!r}")
    conn.execute("VACUUM ANALYZE")
    conn.execute("CHECKPOINT")


def install_pgmq(args) -> str:
    """The pgmq extension, SQL only; returns where its script came from."""
    ext_dir = Path(subprocess.run(["pg_config", "--sharedir"], capture_output=True, text=True,
                                  check=True).stdout.strip()) / "extension"
    script = ext_dir / f"pgmq--{args.pgmq_version}.sql"
    if args.pgmq_sql:
        source, text = args.pgmq_sql, Path(args.pgmq_sql).read_text()
    else:
        rev = subprocess.run(["git", "--git-dir", args.pgmq_git, "rev-parse", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        date = subprocess.run(["git", "--git-dir", args.pgmq_git, "log", "-1", "--format=%cs"],
                              capture_output=True, text=True, check=True).stdout.strip()
        source = f"github.com/pgmq/pgmq pgmq-extension/sql/pgmq.sql at {rev[:10]} ({date})"
        text = subprocess.run(["git", "--git-dir", args.pgmq_git, "show", "HEAD:pgmq-extension/sql/pgmq.sql"],
                              capture_output=True, text=True, check=True).stdout
    if not script.exists() or script.read_text() != text:
        (ext_dir / "pgmq.control").write_text(
            "comment = 'PGMQ, SQL only (installed by bench/release_ab.py)'\n"
            f"default_version = '{args.pgmq_version}'\nschema = 'pgmq'\nrelocatable = false\n")
        script.write_text(text)
    return f"{source}, installed as extension pgmq version {args.pgmq_version}"


def reset_any(conn, kind: str, channels: int, backlog: int) -> None:
    """reset, plus PGMQ: a fresh extension, one queue, its backlog."""
    if kind != "pgmq":
        return reset(conn, kind, channels, backlog)
    conn.execute("DROP EXTENSION IF EXISTS pgmq CASCADE")
    conn.execute("CREATE EXTENSION pgmq")
    conn.execute("SELECT pgmq.create(%s)", (PGMQ_QUEUE,))
    conn.execute("SELECT count(*) FROM pgmq.send_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))",
                 (PGMQ_QUEUE, backlog))
    conn.execute("VACUUM ANALYZE")
    conn.execute("CHECKPOINT")


# ------------------------------------------------------------- the machinery

def tests_running() -> bool:
    return subprocess.run(["pgrep", "-f", "pytest|pg_prove"], capture_output=True).returncode == 0


class Run:
    """The results so far (saved after every figure) and the test-run guard."""

    def __init__(self, args) -> None:
        self.args = args
        self.json_path = Path(args.out) / f"{args.name}.json"
        self.data: dict = {"items": {}, "waits": [], "notes": []}

    def save(self) -> None:
        self.json_path.write_text(json.dumps(self.data, indent=1, default=float))

    def put(self, *path_and_value) -> None:
        *path, key, value = path_and_value
        d = self.data
        for p in path:
            d = d.setdefault(p, {})
        d.setdefault(key, []).append(value)
        self.save()

    def measured(self, what: str, measure):
        """measure() once no test suite runs; redone (up to twice) when one
        started while it ran: a thread polls pgrep every second meanwhile.
        The disturbed values are kept in the JSON ("disturbed")."""
        for attempt in range(3):
            self.quiet(what)
            seen, stop = [], threading.Event()

            def watch() -> None:
                while not stop.wait(1):
                    if tests_running():
                        seen.append(1)
                        return

            th = threading.Thread(target=watch, daemon=True)
            th.start()
            value = measure()
            stop.set()
            th.join()
            if not seen or attempt == 2:
                if seen:
                    self.data["notes"].append(f"{what}: a test suite ran during all three attempts; the last kept.")
                return value
            self.data.setdefault("disturbed", []).append([what, value])
            self.save()
            log(f"  ({what}: a test suite started during the run: {value} discarded, redone)")

    def quiet(self, what: str) -> None:
        """Wait while another engineer's test suite runs."""
        start = time.monotonic()
        while not self.args.no_wait and tests_running():
            log(f"  (tests running: waiting before {what})")
            time.sleep(15)
        waited = time.monotonic() - start
        if waited > 1:
            self.data["waits"].append([what, round(waited)])
            self.save()


QUEUE_TABLES = {"amo": BASELINE_TABLE, "floor": "bench_floor.m", "pgmq": f"pgmq.q_{PGMQ_QUEUE}"}


def pgbench_run(run: Run, target: Target, script: Path, label: str, kind: str = "lonnymq",
                setup=None, **kw) -> float:
    """One measured pgbench run, after setup() (again when it is redone);
    keeps, as a check, how many messages its queue held after it (the
    backlog is standing: about what it started with)."""
    def measure() -> float:
        if setup:
            setup()
        return pgbench(target, script, run.args.seconds, **kw)

    tps = run.measured(label, measure)
    dsn = target.cluster.dsn(kw.get("dbname", "lonnymq_bench"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        left = conn.execute(f"SELECT count(*) FROM {QUEUE_TABLES.get(kind.partition('@')[0], 'lonnymq.message')}"
                            ).fetchone()[0]
    run.data.setdefault("left_after", {}).setdefault(label.split("] ", 1)[-1], []).append(left)
    log(f"  {label}: {tps:,.0f} tps (messages left {left:,})")
    return tps


def fresh(target: Target, kind: str, channels: int, backlog: int = BACKLOG):
    def setup() -> None:
        with target.connect() as conn:
            reset_any(conn, kind, channels, backlog)
    return setup


def rounds_pass(run: Run, target: Target, tmp: Path, sync: str, rounds: int) -> None:
    """Items 1 and 2, interleaved: every loop once per round."""
    old = f"lonnymq@{run.args.old}"
    worker = [("1ch", "amo"), ("1ch", "floor"), ("1q", "pgmq")]
    worker += [(s, k) for s in ("1ch", "64ch", "10kch") for k in (old, "lonnymq")]
    batch = ["amo", "pgmq", old, "lonnymq"]
    options = SYNC_OFF if sync == "off" else None
    for r in range(rounds):
        took = run.data.setdefault("round_seconds", [])
        if sync == "off" and took and time.time() + statistics.median(took) > run.deadline:
            run.data["notes"].append(f"Sync-off rounds {r + 1} to {rounds} skipped: out of time.")
            run.data["env"]["rounds_off"] = r
            run.save()
            return
        round_start = time.monotonic()
        # The previous release and the build swap places every other round.
        # With the build always second, 0.13.1's first A/B read 0.95 to 0.99
        # of 0.13.0 on the worker loop; the same two, alternated, in separate
        # pgbench runs (1 and 8 clients, 64 channels): 0.99 to 1.03.
        swap = {old: "lonnymq", "lonnymq": old} if r % 2 else {}
        for shape, kind in [(s, swap.get(k, k)) for s, k in worker]:
            n = 1 if shape == "1q" else SHAPES[shape]
            script = tmp / f"w-{kind.replace('@', '_')}-{shape}.sql"
            script.write_text(PGMQ_WORKER if kind == "pgmq" else rate_script(kind, n))
            tps = pgbench_run(run, target, script, f"[sync {sync} round {r + 1}/{rounds}] worker {shape} {kind}",
                              kind, setup=fresh(target, kind, n), options=options)
            run.put("items", "worker", sync, f"{shape} {kind}", tps)
        for kind in [swap.get(k, k) for k in batch]:
            script = tmp / f"b-{kind.replace('@', '_')}.sql"
            script.write_text(BATCH_SCRIPTS[kind.partition("@")[0]])
            tps = pgbench_run(run, target, script, f"[sync {sync} round {r + 1}/{rounds}] batch {kind}",
                              kind, setup=fresh(target, kind, 1), options=options, defines=BATCH_DEFINES)
            run.put("items", "batch", sync, kind, tps * BATCH)
        took.append(time.monotonic() - round_start)


# --------------------------------------------------------- item 3: the drain

def _drain_client(dsn: str, kind: str, barrier, q) -> None:
    """kind: amo (the plain table), lonnymq[@OLD] (dequeue, then complete: two
    calls and two commits a message), or "lonnymq worker" (the worker's one
    call, message_complete_dequeue, completing the previous call's delivery:
    one call and one commit a message, as the plain table)."""
    is_worker = kind == "lonnymq worker"
    amo = (f"DELETE FROM {BASELINE_TABLE} WHERE id = (SELECT id FROM {BASELINE_TABLE} "
           "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id")
    left = f"SELECT EXISTS (SELECT 1 FROM {BASELINE_TABLE if kind == 'amo' else 'lonnymq.message'})"
    # prepare_threshold 0: every statement prepared from its first call, as
    # bench/clients.py's clients (lonnymq_dev.calls passes no prepare flag).
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0) as conn:
        done = empty = 0
        held: list[tuple] = []  # the delivery a worker's next call completes
        barrier.wait()
        while True:
            if is_worker:
                rows = calls.complete_dequeue(conn, held)
                row = rows[0] if rows else None
                done += len(held)
                held = rows
            elif kind == "amo":
                row = conn.execute(amo).fetchone()
                done += row is not None
            else:
                row = calls.dequeue_one(conn)
                if row is not None:
                    calls.complete(conn, *row)
                done += row is not None
            if row is None:
                # Nothing ready: done when nothing is left at all, else (others
                # hold the rest, or a take skipped what was ready) take again.
                if not conn.execute(left).fetchone()[0]:
                    break
                empty += 1
        q.put((done, empty, time.monotonic()))


def drain(target: Target, kind: str) -> dict:
    with target.connect() as conn:
        reset(conn, kind.split(" ")[0], 1, DRAIN_MESSAGES)
    ctx = mp.get_context("fork")
    barrier, q = ctx.Barrier(CLIENTS + 1), ctx.Queue()
    procs = [ctx.Process(target=_drain_client, args=(target.dsn, kind, barrier, q)) for _ in range(CLIENTS)]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.monotonic()
    results = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    done = sum(r[0] for r in results)
    seconds = max(r[2] for r in results) - start
    return {"messages": done, "empty_takes": sum(r[1] for r in results), "seconds": seconds,
            "rate": done / seconds}


def item_drain(run: Run, target: Target) -> None:
    kinds = ["amo", f"lonnymq@{run.args.old}", "lonnymq", "lonnymq worker"]
    for r in range(run.args.drain_reps):
        for kind in kinds:
            res = run.measured(f"drain {kind} rep {r + 1}", lambda: drain(target, kind))
            log(f"  [drain {r + 1}/{run.args.drain_reps}] {kind}: {res['rate']:,.0f} msg/s "
                f"({res['messages']} in {res['seconds']:.2f} s, {res['empty_takes']} empty takes)")
            run.put("items", "drain", kind, res)


# ------------------------------------------------ item 4: a million channels

def explain_buffers(conn, sql: str, params=()) -> int:
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()[0]
    top = plan[0]["Plan"]
    return top["Shared Hit Blocks"] + top["Shared Read Blocks"]


def call_buffers(conn, channels: int, probes: int = 5) -> dict:
    """Shared buffers (hit + read) of one create, dequeue and complete, after
    one unmeasured cycle; the median of `probes`.  The dequeue probe locks
    for 1 ms (its message is taken again later); the complete probe
    completes a message taken by a plain dequeue."""
    out: dict[str, list[int]] = {"create": [], "dequeue": [], "complete": []}
    for i in range(probes + 1):
        ch = f"c{random.randint(1, channels)}"
        b = {"create": explain_buffers(conn, "SELECT lonnymq.message_create(%s, '\\x00')", (ch,)),
             "dequeue": explain_buffers(conn, "SELECT * FROM lonnymq.message_dequeue(1)")}
        row = calls.dequeue_one(conn)
        b["complete"] = explain_buffers(conn, "SELECT lonnymq.message_complete(%s, %s)", row)
        if i:
            for k, v in b.items():
                out[k].append(v)
    return {k: {"probes": v, "median": statistics.median(v)} for k, v in out.items()}


def drain_all(conn) -> dict:
    """message_complete_dequeue with p_limit 1000 until no message is left
    (messages still locked by finished clients are retaken once their locks
    expire)."""
    start, taken, rows, waited = time.monotonic(), 0, [], 0.0
    while True:
        rows = calls.complete_dequeue(conn, rows, limit=1000)
        taken += 1
        if not rows:
            if not conn.execute("SELECT EXISTS (SELECT 1 FROM lonnymq.message)").fetchone()[0]:
                break
            time.sleep(2)
            waited += 2
    return {"seconds": time.monotonic() - start, "calls": taken, "waited_for_locks": waited}


def item_million(run: Run, target: Target, tmp: Path, version: str | None, channels: int) -> None:
    """A database of `channels` channels with one message each, rounds of its
    worker loop against one channel's (on lonnymq_bench), buffers, drain."""
    kind = f"lonnymq@{version}" if version else "lonnymq"
    key = f"{kind} {channels}"
    db = f"lonnymq_ch{channels}_{(version or 'new').replace('.', '_')}"
    target.cluster.create_database(db, with_extension=False)
    dsn = target.cluster.dsn(db)
    res: dict = {"kind": kind, "channels": channels}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION lonnymq" + (f" VERSION '{version}'" if version else ""))
        start, chunk = time.monotonic(), CREATE_CHUNK
        for lo in range(1, channels + 1, chunk):
            conn.execute("SELECT count(lonnymq.message_create('c' || g, '\\x00')) FROM generate_series(%s::int, %s::int) g",
                         (lo, min(lo + chunk - 1, channels)))
            if (lo - 1) % 100_000 == 0 or lo + chunk > channels:
                log(f"  {key}: created {min(lo + chunk - 1, channels):,} ({time.monotonic() - start:.0f} s)")
        res["create_seconds"] = time.monotonic() - start
        conn.execute("VACUUM ANALYZE")
        res["channel_rows_full"] = conn.execute("SELECT count(*) FROM lonnymq.channel").fetchone()[0]
        res["size_mb"] = conn.execute(
            "SELECT (sum(pg_total_relation_size(c.oid)) / 1e6)::float8 FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'lonnymq' AND c.relkind = 'r'").fetchone()[0]
    many = tmp / f"m-{db}.sql"
    many.write_text(rate_script(kind, channels))
    one = tmp / f"m-{kind.replace('@', '_')}-1ch.sql"
    one.write_text(rate_script(kind, 1))
    res["many"], res["one"] = [], []
    for r in range(run.args.rounds):
        def vacuum() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
                conn.execute("CHECKPOINT")

        res["many"].append(pgbench_run(run, target, many, f"[{key} round {r + 1}] {channels:,} channels",
                                       setup=vacuum, dbname=db))
        res["one"].append(pgbench_run(run, target, one, f"[{key} round {r + 1}] 1ch", setup=fresh(target, kind, 1)))
        run.data["items"].setdefault("million", {})[key] = res
        run.save()
    with target.connect() as conn:  # one channel, a backlog of 10,000 (the last 1ch run's)
        conn.execute("VACUUM ANALYZE")
        res["buffers_1ch"] = call_buffers(conn, 1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        res["buffers_many"] = call_buffers(conn, channels)
        res["messages_before_drain"] = conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0]
        res["channel_rows_before_drain"] = conn.execute("SELECT count(*) FROM lonnymq.channel").fetchone()[0]
        # The clients' last takes are locked for 60 s: complete them (their
        # tokens read from the table) rather than wait for the locks to expire.
        res["completed_in_flight"] = conn.execute(
            "SELECT count(*) FILTER (WHERE lonnymq.message_complete(id, num_attempts)) "
            "FROM lonnymq.message WHERE is_locked").fetchone()[0]
        res["drain"] = drain_all(conn)
        res["channel_rows_after_drain"] = conn.execute("SELECT count(*) FROM lonnymq.channel").fetchone()[0]
        res["messages_after_drain"] = conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0]
    log(f"  {key}: {json.dumps({k: v for k, v in res.items() if k not in ('many', 'one')})}")
    run.data["items"].setdefault("million", {})[key] = res
    run.save()
    with target.connect() as conn:
        conn.execute(f"DROP DATABASE {db}")


# ----------------------------------------------------------------- the report

def med(v) -> float:
    return statistics.median(v)


def fmt(v: float) -> str:
    return f"{v:,.0f}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report(data: dict) -> str:
    env, items = data["env"], data["items"]
    old = env["old"]
    o = f"lonnymq@{old}"
    L: list[str] = []
    targets: list[str] = []
    version = env.get("version", "0.11.0")  # (reports before 0.11.1 did not record it)
    L += [f"# Release {version}: its performance claims, side by side ({env['date']})\n",
          f"`{env['command']}`: one private throwaway cluster (`lonnymq_dev/pgcluster.py`), one run, "
          f"started {env['started']}, ended {env.get('ended', '(not finished)')}.\n",
          "## Environment\n",
          f"- {env['postgres']}",
          f"- cluster settings: {', '.join(f'{k} = {v}' for k, v in env['settings'].items())}",
          f"- commit {env['commit']}; the working tree's build (installed system-wide; "
          f"`lonnymq` = {version}, `{o}` = `CREATE EXTENSION lonnymq VERSION '{old}'` through the installed "
          "upgrade chain)",
          f"- PGMQ: {env['pgmq']}",
          f"- {env['cores']} cores ({env['machine']}), shared; load average (1/5/15 min) at start "
          f"{env['load_start']}, at end {env.get('load_end', '?')}",
          f"- pgbench {CLIENTS} clients, `-j 2 -M prepared`, {env['seconds']:g} s per run; rounds: "
          f"{env['rounds']} with synchronous_commit on, {env['rounds_off']} with it off "
          "(`PGOPTIONS=-c synchronous_commit=off` for the pgbench sessions)",
          f"- waits for other engineers' test runs (`pgrep -f \"pytest|pg_prove\"`, polled every 15 s): "
          f"{sum(w[1] for w in data['waits'])} s in total over {len(data['waits'])} waits; runs during which "
          "a test suite started (a thread polls pgrep every second during each run) were discarded and redone "
          f"after it: {len(data.get('disturbed', []))}"
          + (" (" + "; ".join(f"{w}: {v if isinstance(v, (int, float)) else round(v['rate'])}"
                              for w, v in data["disturbed"]) + ")" if data.get("disturbed") else ""),
          ""]
    if data.get("notes"):
        L += ["Notes: " + " ".join(data["notes"]), ""]

    # item 1
    worker = items.get("worker", {})
    L += ["## 1. The worker loop\n",
          "One pgbench transaction = one message. plain table (amo): `INSERT`; `DELETE … WHERE id = (SELECT id … "
          "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1)` (at most once, 2 commits). floor: the two minimal "
          "PL/pgSQL calls of bench/clients.py (`create`; `complete_dequeue` of the previous take). PGMQ, one "
          "queue: `pgmq.send(q, '{}')`; then `BEGIN; pgmq.delete(q, <id the previous transaction read>); "
          "pgmq.read(q, vt => 60, qty => 1); COMMIT` (2 commits per message, as the others; 5 statements). "
          f"lonnymq: `message_create('c' || random(1, N), '\\x00')`; `message_complete_dequeue` of the "
          "previous delivery, lock 60,000 ms (2 commits). Standing backlog 10,000 ready messages (1ch, 64ch, "
          "PGMQ, amo, floor), or one message in each of 10,000 channels (10kch). Ratios on the medians.\n"]
    for sync in ("on", "off"):
        rows = worker.get(sync)
        if not rows:
            continue
        n = max(len(v) for v in rows.values())
        floor = med(rows["1ch floor"])
        L += [f"### synchronous_commit {sync}\n",
              "| shape | loop | " + " | ".join(f"round {i + 1}" for i in range(n))
              + " | median msg/s | × floor | × its 1ch | × " + o + " |",
              "|---|---|" + "---|" * n + "---|---|---|---|"]
        for key, vals in rows.items():
            shape, kind = key.split(" ", 1)
            one = rows.get(f"1ch {kind}")
            vs_old = rows.get(f"{shape} {o}") if kind == "lonnymq" else None
            L.append(f"| {shape} | {kind} | " + " | ".join(fmt(v) for v in vals) + " |" * (n - len(vals) + 1)
                     + f" {fmt(med(vals))} | {med(vals) / floor:.2f} | "
                     + (f"{med(vals) / med(one):.2f}" if one else "") + " | "
                     + (f"{med(vals) / med(vs_old):.2f}" if vs_old else "") + " |")
        L.append("")
    # item 2
    batch = items.get("batch", {})
    if batch:
        L += ["## 2. Batches of 100\n",
              "One pgbench transaction = 100 messages. plain table: `INSERT … SELECT` of 100 rows; "
              "`DELETE … WHERE id = ANY(ARRAY(SELECT id … ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 100))`. "
              "PGMQ: `send_batch` of 100; then `BEGIN; delete(q, <the 100 ids read by the previous "
              "transaction>); read(q, 60, 100); COMMIT`. lonnymq: `message_create_batch` of 100 in one channel; "
              "`message_complete_dequeue` completing the previous 100 and taking 100 (`p_limit` 100). "
              "Backlog 10,000 in the one channel / queue / table. msg/s = tps × 100.\n"]
        for sync in ("on", "off"):
            rows = batch.get(sync)
            if not rows:
                continue
            n = max(len(v) for v in rows.values())
            plain = med(rows["amo"])
            L += [f"### synchronous_commit {sync}\n",
                  "| loop | " + " | ".join(f"round {i + 1}" for i in range(n))
                  + " | median msg/s | × plain table batched | × " + o + " |",
                  "|---|" + "---|" * n + "---|---|---|"]
            for kind, vals in rows.items():
                L.append(f"| {kind} | " + " | ".join(fmt(v) for v in vals) + " |" * (n - len(vals) + 1)
                         + f" {fmt(med(vals))} | {med(vals) / plain:.2f} | "
                         + (f"{med(vals) / med(rows[o]):.2f}" if kind == "lonnymq" and o in rows else "") + " |")
            r = med(rows["lonnymq"]) / plain
            targets.append(f"| batches of 100, sync {sync}: lonnymq × plain table batched | {r:.2f} | ≥ 0.95 | "
                           f"{verdict(r >= 0.95)} |")
            L.append("")
    # item 3
    dr = items.get("drain", {})
    if dr:
        L += ["## 3. Eight consumers draining one channel\n",
              f"{DRAIN_MESSAGES:,} ready messages in one channel (one table), {CLIENTS} psycopg clients (processes, "
              "prepared statements, autocommit), started together; each loops `message_dequeue(60000)` then "
              "`message_complete(id, num_attempts)` (the plain table: its `DELETE … SKIP LOCKED LIMIT 1 "
              "RETURNING`), and stops when a take finds nothing and nothing is left in the table (a take that "
              "finds nothing while messages are left, held by others or skipped, is counted as an empty take "
              "and retried). `lonnymq worker` loops the worker's one call, `message_complete_dequeue` "
              "(completing the message the previous call delivered): one call and one commit a message, as the "
              "plain table, where the loop above makes two. msg/s = messages / (last client done − start). "
              "synchronous_commit on.\n",
              "| loop | " + " | ".join(f"rep {i + 1}" for i in range(len(dr['amo'])))
              + " | best | median | best × plain best | median × plain median | empty takes |",
              "|---|" + "---|" * len(dr["amo"]) + "---|---|---|---|---|"]
        pb, pm = max(x["rate"] for x in dr["amo"]), med([x["rate"] for x in dr["amo"]])
        for kind, reps in dr.items():
            rates = [x["rate"] for x in reps]
            L.append(f"| {kind} | " + " | ".join(f"{fmt(x['rate'])} ({x['messages']:,})" for x in reps)
                     + f" | {fmt(max(rates))} | {fmt(med(rates))} | {max(rates) / pb:.2f} | {med(rates) / pm:.2f} | "
                     + ", ".join(str(x["empty_takes"]) for x in reps) + " |")
        L.append("\n(messages drained in parentheses.)\n")
        for kind in ("lonnymq", "lonnymq worker", o):
            if kind in dr:
                rates = [x["rate"] for x in dr[kind]]
                targets.append(f"| 8 consumers, one channel: {kind} × plain (median; best) | "
                               f"{med(rates) / pm:.2f}; {max(rates) / pb:.2f} | ≥ 0.4 | "
                               + (verdict(med(rates) / pm >= 0.4) if kind == "lonnymq" else "(reference)") + " |")
    # item 4
    mil = items.get("million", {})
    for key, res in mil.items():
        ch = res["channels"]
        n = len(res["many"])
        L += [f"## 4. {ch:,} channels: {res['kind']}\n",
              f"{ch:,} messages, one in each of {ch:,} channels, created by `SELECT count(lonnymq.message_create("
              f"'c' || g, '\\x00')) FROM generate_series(…)` in chunks of {CREATE_CHUNK:,} (one transaction each): {res['create_seconds']:.0f} s; "
              f"then VACUUM ANALYZE; lonnymq's tables {res['size_mb']:,.0f} MB; `lonnymq.channel` rows: "
              f"{res['channel_rows_full']:,}. The worker loop (pgbench as in 1, producers at random over the "
              f"{ch:,} channels) on that database, against the same loop on one channel (a fresh extension "
              "with a backlog of 10,000, in the other database of the cluster), interleaved; VACUUM ANALYZE "
              "before each run. synchronous_commit on.\n",
              "| shape | " + " | ".join(f"round {i + 1}" for i in range(n)) + " | median msg/s | × 1ch |",
              "|---|" + "---|" * n + "---|---|",
              f"| {ch:,} channels | " + " | ".join(fmt(v) for v in res["many"]) + " |" * (n - len(res["many"]) + 1)
              + f" {fmt(med(res['many']))} | {med(res['many']) / med(res['one']):.2f} |",
              f"| 1ch | " + " | ".join(fmt(v) for v in res["one"]) + " |" * (n - len(res["one"]) + 1)
              + f" {fmt(med(res['one']))} | 1.00 |", ""]
        r = med(res["many"]) / med(res["one"])
        targets.append(f"| {ch:,} channels × 1ch, {res['kind']} | {r:.2f} | ≥ 0.8 | "
                       + (verdict(r >= 0.8) if res["kind"] == "lonnymq" else "(reference)") + " |")
        if "buffers_many" in res:
            L += ["Shared buffers (hit + read) of the top plan node, `EXPLAIN (ANALYZE, BUFFERS)` of one call, "
                  "median of 5 after one unmeasured cycle (create into a random existing channel; "
                  "`message_dequeue(1)`; `message_complete` of a message taken by a plain dequeue); at "
                  f"{ch:,} channels (after the runs) and on one channel with a backlog of 10,000:\n",
                  f"| call | {ch:,} channels (probes) | median | 1ch (probes) | median | × |",
                  "|---|---|---|---|---|---|"]
            for call in ("create", "dequeue", "complete"):
                m, one = res["buffers_many"][call], res["buffers_1ch"][call]
                L.append(f"| {call} | {', '.join(map(str, m['probes']))} | {m['median']:g} | "
                         f"{', '.join(map(str, one['probes']))} | {one['median']:g} | "
                         f"{m['median'] / max(one['median'], 1):.2f} |")
            d = res["drain"]
            L += ["",
                  f"Drain: {res['messages_before_drain']:,} messages left, `lonnymq.channel` "
                  f"{res['channel_rows_before_drain']:,} rows; `message_complete_dequeue(…, 60000, p_limit => 1000)` "
                  f"in a loop until no message was left (the {res.get('completed_in_flight', 0)} messages still locked by the "
                  "pgbench clients' last takes completed first with `message_complete`, their tokens read from "
                  f"`lonnymq.message`): {d['calls']:,} calls, {d['seconds']:.0f} s "
                  f"({d['waited_for_locks']:.0f} s of it waiting for the locks of the clients' last takes to "
                  f"expire). Then `SELECT count(*) FROM lonnymq.channel` = **{res['channel_rows_after_drain']:,}** "
                  f"(messages left: {res['messages_after_drain']:,}).\n"]
            targets.append(f"| channel rows after draining {ch:,} channels, {res['kind']} | "
                           f"{res['channel_rows_after_drain']:,} | 0 (only configured channels) | "
                           + (verdict(res["channel_rows_after_drain"] == 0) if res["kind"] == "lonnymq"
                              else "(reference)") + " |")
    if data.get("server_log"):
        sl = data["server_log"]
        L += ["## Server log\n",
              f"ERROR lines: {sl['errors']}, deadlocks: {sl['deadlocks']}, WARNING lines: {sl['warnings']}.\n"]
        if sl["sample"]:
            L += ["```", *sl["sample"], "```", ""]
    head = ["## Targets\n", "| claim | measured | target | |", "|---|---|---|---|", *targets, ""]
    cut = L.index("## Environment\n")
    return "\n".join(L[:cut] + head + L[cut:]) + "\n"


def server_log(target: Target) -> dict:
    try:
        text = Path(target.cluster.log_path).read_text(errors="replace")
    except OSError as e:
        return {"errors": "?", "deadlocks": "?", "warnings": "?", "sample": [str(e)]}
    lines = text.splitlines()
    errors = [l for l in lines if "ERROR:" in l]
    return {"errors": len(errors), "deadlocks": sum("deadlock" in l for l in lines),
            "warnings": sum("WARNING:" in l for l in lines),
            "sample": sorted({re.sub(r"^\S+ \S+ \S+ \[\d+\] ", "", l)[:200] for l in errors})[:10]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="rounds with synchronous_commit on (items 1, 2 and 4)")
    p.add_argument("--rounds-off", type=int, default=3, help="rounds with it off (items 1 and 2); 0 skips")
    p.add_argument("--seconds", type=float, default=10, help="seconds per pgbench run")
    p.add_argument("--drain-reps", type=int, default=3, help="repetitions of item 3")
    p.add_argument("--old", default="0.10.1", help="the older installed version to compare")
    p.add_argument("--million", type=int, default=1_000_000, help="channels of item 4 (0 skips it)")
    p.add_argument("--old-channels", type=int, default=100_000,
                   help="item 4 for the old version at this many channels, last (0 skips it)")
    p.add_argument("--items", default="1,2,3,4", help="items to run (1 and 2 always run together)")
    p.add_argument("--pgmq-git", default="/work/.mirror/pgmq+pgmq/repo", help="a git dir of github.com/pgmq/pgmq")
    p.add_argument("--pgmq-sql", help="PGMQ's install script (instead of --pgmq-git)")
    p.add_argument("--pgmq-version", default="1.5.2", help="the version to install it as")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--name", default=datetime.now().strftime("%Y-%m-%d") + "-release")
    p.add_argument("--budget", type=float, default=1e9,
                   help="minutes: sync-off rounds that would end after it, and then item 4's old version, are skipped")
    p.add_argument("--no-wait", action="store_true", help="do not wait for test runs (smoke tests only)")
    p.add_argument("--report-only", action="store_true", help="rewrite the .md from the .json")
    args = p.parse_args()
    run = Run(args)
    run.deadline = time.time() + args.budget * 60
    md = Path(args.out) / f"{args.name}.md"
    if args.report_only:
        md.write_text(report(json.loads(run.json_path.read_text())))
        log(f"report: {md}")
        return 0
    items = set(args.items.split(","))
    run.data["env"] = env = {
        "date": datetime.now().strftime("%Y-%m-%d"),
        "command": ".venv/bin/python -m bench.release_ab " + " ".join(sys.argv[1:]),
        "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "load_start": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count(),
        "machine": " ".join(os.uname()[i] for i in (0, 2, 4)),
        "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "old": args.old, "seconds": args.seconds, "rounds": args.rounds, "rounds_off": args.rounds_off,
        "pgmq": install_pgmq(args) if items & {"1", "2"} else "(not run)",
    }
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))  # stops the cluster, writes the report
    target = Target()
    try:
        target.start()
        with target.connect() as conn:
            env["postgres"] = conn.execute("SELECT version()").fetchone()[0]
            env["version"] = conn.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'lonnymq'").fetchone()[0]
            env["settings"] = dict(conn.execute(
                "SELECT name, setting || coalesce(unit, '') FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
                (["shared_buffers", "fsync", "synchronous_commit", "max_wal_size", "checkpoint_timeout",
                  "autovacuum", "wal_level", "max_connections", "shared_preload_libraries"],)).fetchall())
        run.save()
        with tempfile.TemporaryDirectory() as tmp:
            if items & {"1", "2"}:
                rounds_pass(run, target, Path(tmp), "on", args.rounds)
            if "3" in items:
                item_drain(run, target)
            if "4" in items and args.million:
                item_million(run, target, Path(tmp), None, args.million)
            if items & {"1", "2"} and args.rounds_off:
                rounds_pass(run, target, Path(tmp), "off", args.rounds_off)
            if "4" in items and args.old_channels and time.time() + 360 > run.deadline:
                run.data["notes"].append(f"Item 4 for {args.old} at {args.old_channels:,} channels skipped: out of time.")
            elif "4" in items and args.old_channels:
                item_million(run, target, Path(tmp), args.old, args.old_channels)
        run.data["server_log"] = server_log(target)
    finally:
        env["ended"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        env["load_end"] = [round(x, 2) for x in os.getloadavg()]
        run.save()
        target.stop()
        md.write_text(report(run.data))  # (also of an interrupted run: what it has)
        log(f"report: {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
