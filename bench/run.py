"""lonnymq benchmark: `make bench`, `.venv/bin/python bench/run.py` or `python -m bench`.

Starts a private PostgreSQL cluster (lonnymq_dev/pgcluster.py) with
pg_stat_statements, or uses the server named by PGHOST / PGPORT (database
`lonnymq_bench`, created when missing; lonnymq must be installed there), then
runs every scenario and the two plain-table baselines at each client count,
one process and one connection per client, for a fixed warm-up + measurement
time, and writes bench/results/<date>.md, <date>.json and PNG plots.

Settings (environment, or the flags of `--help`):
    BENCH_DURATION   seconds measured per run (default 10)
    BENCH_WARMUP     seconds of warm-up per run, not measured (default 3)
    BENCH_CLIENTS    client counts, e.g. "1,4,8,16" (default)
    BENCH_SCENARIOS  variant keys, groups (baseline, lifecycle, channels, batch,
                     backlog, saturated, held), scenario numbers 1-6, or all (default)
    BENCH_BACKLOGS   backlog sizes (default "10000,100000,1000000")
    BENCH_SATURATED  saturated channels (default 10000)
    BENCH_HOLD_BEFORE  held snapshot (scenario 6): seconds of normal running
                     before the snapshot is taken (default 30)
    BENCH_HOLD       held snapshot: seconds the snapshot is held (default 150)
    BENCH_PROFILE    1 (default): also a profiling pass (pg_stat_statements with
                     track = all, function times, wait events, auto_explain plans)
    BENCH_ROUNDS     interleaved repeat rounds of the throughput-ratio targets
                     (default 3; 0 skips): at the target client count (8), the
                     at-most-once baseline, one channel, 64 channels (both) and
                     batches of 100 run once more per round, one after the
                     other, and each target is judged on the median of its
                     per-round ratios, so that a neighbour's burst on this
                     shared machine cannot decide it alone
    BENCH_VERSIONS   extension versions to compare A/B, e.g. "0.7.0,0.8.0" (default
                     "": CREATE EXTENSION lonnymq at its default version): every
                     lonnymq run, and every round, runs once per version, one
                     right after the other, from CREATE EXTENSION lonnymq VERSION;
                     the report adds "A/B by version" (targets and plots: the last)
    BENCH_OUT        output directory (default bench/results)
    BENCH_NAME       report name (default: today's date, YYYY-MM-DD)
    BENCH_LOADGEN    "P+C" (e.g. "16+16"): also a distributed run of P producers
                     and C consumers as Spark tasks (pipeline/loadgen.py), for
                     client counts beyond what one driver process spawns; "" skips
    BENCH_LOADGEN_MASTER  Spark master for it (default local[P+C])
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from itertools import product
from pathlib import Path

import psycopg

from bench import backend_profile as prof
from bench import held
from bench import report
from bench.clients import Workload, client_main
from bench.scenarios import (
    GROUPS,
    HELD_GROUP,
    Variant,
    catalogue,
    reset_baseline,
    reset_lonnymq,
    select,
    vacuum_queue,
    wait_stats_flush,
)

ROOT = Path(__file__).resolve().parent.parent
DBNAME = "lonnymq_bench"

# The private cluster's settings: pg_stat_statements for the per-call server
# times, memory for a 1M-message backlog, and no checkpoint inside a run
# (each run starts with a CHECKPOINT).
# synchronous_commit = on, what users run (0.10.0; before, off): a commit
# waits for its WAL flush, so the number of commits per message counts
# (the lifecycle: 3; the worker loop and the at-most-once baseline: 2).
# The flush latency is the disk's, noisy on shared machines; the second pass
# (BENCH_SYNC_OFF) runs the target variants again with it off in the
# sessions, for the CPU comparison.
CLUSTER_SETTINGS = {
    "synchronous_commit": "on",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "top",
    "pg_stat_statements.max": 5000,
    "track_io_timing": "on",
    "shared_buffers": "512MB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
    "max_connections": 100,
}


def log(msg: str) -> None:
    print(msg, flush=True)


def _env_list(value: str) -> list[int]:
    return [int(x.replace("_", "")) for x in value.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    e = os.environ
    p = argparse.ArgumentParser(description="lonnymq benchmark (see the module docstring)")
    p.add_argument("--duration", type=float, default=float(e.get("BENCH_DURATION", 10)))
    p.add_argument("--warmup", type=float, default=float(e.get("BENCH_WARMUP", 3)))
    p.add_argument("--clients", default=e.get("BENCH_CLIENTS", "1,4,8,16"))
    p.add_argument("--scenarios", default=e.get("BENCH_SCENARIOS", "all"))
    p.add_argument("--backlogs", default=e.get("BENCH_BACKLOGS", "10000,100000,1000000"))
    p.add_argument("--saturated", type=int, default=int(e.get("BENCH_SATURATED", 10000)))
    p.add_argument("--hold-before", type=float, default=float(e.get("BENCH_HOLD_BEFORE", 30)),
                   help="held snapshot: seconds of normal running before the snapshot")
    p.add_argument("--hold", type=float, default=float(e.get("BENCH_HOLD", 150)),
                   help="held snapshot: seconds the snapshot is held")
    p.add_argument("--profile", type=int, default=int(e.get("BENCH_PROFILE", 1)), help="1: profiling pass")
    p.add_argument("--out", default=e.get("BENCH_OUT", str(ROOT / "bench" / "results")))
    p.add_argument("--name", default=e.get("BENCH_NAME", ""))
    p.add_argument("--set", dest="settings", action="append",
                   default=[x for x in e.get("BENCH_SETTINGS", "").split(",") if x.strip()],
                   help="extra setting of the private cluster, NAME=VALUE (repeatable; BENCH_SETTINGS "
                        "takes a comma-separated list)")
    p.add_argument("--rounds", type=int, default=int(e.get("BENCH_ROUNDS", 3)),
                   help="interleaved repeat rounds of the throughput-ratio targets (0: none)")
    p.add_argument("--sync-off", type=int, default=int(e.get("BENCH_SYNC_OFF", 1)),
                   help="1: a second pass of the target variants with synchronous_commit off")
    p.add_argument("--versions", default=e.get("BENCH_VERSIONS", ""),
                   help="extension versions to compare A/B, comma-separated (default: the default version)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--loadgen", default=e.get("BENCH_LOADGEN", ""),
                   help='"P+C": also P producers and C consumers as Spark tasks (pipeline.loadgen)')
    p.add_argument("--loadgen-master", default=e.get("BENCH_LOADGEN_MASTER", ""))
    a = p.parse_args(argv)
    a.clients = _env_list(a.clients)
    a.backlogs = _env_list(a.backlogs)
    a.versions = [x.strip() for x in a.versions.split(",") if x.strip()]
    a.settings = dict(x.strip().split("=", 1) for x in a.settings)
    if a.loadgen and not re.fullmatch(r"[1-9][0-9]*\+[1-9][0-9]*", a.loadgen):
        p.error(f'--loadgen / BENCH_LOADGEN must look like "16+16", got {a.loadgen!r}')
    if not a.name:
        a.name = datetime.now().strftime("%Y-%m-%d")
    return a


class Target:
    """Where the benchmark runs: a private cluster, or PGHOST/PGPORT."""

    def __init__(self, settings: dict | None = None, pg_config: str | None = None) -> None:
        self.settings = {**CLUSTER_SETTINGS, **(settings or {})}
        self.cluster = None
        self.pg_config = pg_config  # a private cluster of this server (default $PG_CONFIG's)
        self.external = not pg_config and bool(os.environ.get("PGHOST") or os.environ.get("PGPORT"))

    def start(self) -> None:
        if self.external:
            self.dsn = f"dbname={DBNAME}"
            admin_db = os.environ.get("PGDATABASE") or "postgres"
            with psycopg.connect(f"dbname={admin_db}", autocommit=True) as c:
                if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DBNAME,)).fetchone():
                    c.execute(f"CREATE DATABASE {DBNAME}")
            self.where = (f"server at PGHOST={os.environ.get('PGHOST', '(default)')} "
                          f"PGPORT={os.environ.get('PGPORT', '(default)')}, database {DBNAME}")
        else:
            from lonnymq_dev.pgcluster import Cluster

            self.cluster = Cluster(settings=self.settings, pg_config=self.pg_config)
            self.cluster.start()
            self.cluster.create_database(DBNAME, with_extension=False)
            self.dsn = self.cluster.dsn(DBNAME)
            self.where = "private throwaway cluster (lonnymq_dev/pgcluster.py)"

    def connect(self):
        return psycopg.connect(self.dsn, autocommit=True)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.cleanup()


def git_commit() -> str:
    """HEAD's short hash, and whether sql/ or bench/ has uncommitted changes:
    what a report was measured on."""
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "sql", "bench"],
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"
    return (commit or "?") + (" (+ uncommitted changes)" if dirty else "")


def environment(conn, args, target: Target) -> dict:
    settings = dict(conn.execute(
        "SELECT name, setting || coalesce(unit, '') FROM pg_settings WHERE name = ANY(%s)",
        (["shared_buffers", "fsync", "synchronous_commit", "max_wal_size", "autovacuum",
          "wal_level", "max_connections"],),
    ).fetchall())
    ext = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'lonnymq'").fetchone()
    return {
        "postgres": conn.execute("SELECT version()").fetchone()[0],
        "server_version": conn.execute("SHOW server_version").fetchone()[0],
        "lonnymq": ", ".join(args.versions) or (ext[0] if ext else "?"),
        "versions": args.versions,
        "cores": os.cpu_count(),
        "machine": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "psycopg": psycopg.__version__,
        "where": target.where,
        "settings": settings,
        "git": git_commit(),
        "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "load_start": os.getloadavg(),
        "duration": args.duration,
        "warmup": args.warmup,
        "clients": args.clients,
    }


# --------------------------------------------------------------------- one run

def run_clients(dsn: str, workload: Workload, n: int, warmup: float, duration: float,
                label: str, sampler_dsn: str | None = None, observer=None) -> dict:
    """n client processes for warmup + duration seconds; returns the merged stats.
    observer: started with (start time, the clients' progress counters) once they
    are all connected, stopped when they are done (held.HeldTimeline)."""
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(n + 1)
    progress = ctx.Array("q", n, lock=False)
    q = ctx.Queue()
    procs = [
        ctx.Process(target=client_main, args=(i, dsn, workload, warmup, duration, barrier, progress, q), daemon=True)
        for i in range(n)
    ]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=120)
    except Exception:  # noqa: BLE001 - a client could not connect
        pass
    sampler = prof.WaitSampler(sampler_dsn).start() if sampler_dsn else None
    t0 = time.monotonic()
    if observer is not None:
        observer.start(t0, progress)
    end = t0 + warmup + duration
    tick = max(2.0, (warmup + duration) / 4)
    next_tick = t0 + tick
    last_total, last_t = 0, t0
    results: list[dict] = []
    while len(results) < n:
        now = time.monotonic()
        if now >= next_tick and now < end:
            total = sum(progress)
            phase = "warm-up" if now - t0 < warmup else "measuring"
            log(f"      {label}: {now - t0:5.1f}/{warmup + duration:.0f} s ({phase}), "
                f"{(total - last_total) / (now - last_t):8,.0f} msg/s")
            last_total, last_t = total, now
            next_tick += tick
        try:
            results.append(q.get(timeout=0.25))
        except Exception:  # noqa: BLE001 - queue.Empty
            if now > end + 120 or (not any(p.is_alive() for p in procs) and q.empty()):
                break
    if sampler:
        sampler.stop()
    if observer is not None:
        observer.stop()
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    fatal = [r["fatal"] for r in results if "fatal" in r]
    if fatal or len(results) < n:
        raise RuntimeError(f"{label}: {n - len(results) + len(fatal)} client(s) failed:\n" + "\n".join(fatal[:3]))
    merged = {"consumed": 0, "empty": 0, "errors": 0, "error_samples": [], "latency_us": [], "calls": {},
              "cpu": merge_cpu([r.get("cpu") for r in results])}
    for r in results:
        merged["consumed"] += r["consumed"]
        merged["empty"] += r["empty"]
        merged["errors"] += r["errors"]
        merged["error_samples"] += r["error_samples"]
        merged["latency_us"] += r["latency_us"]
        for k, c in r["calls"].items():
            m = merged["calls"].setdefault(k, {"count": 0, "total_s": 0.0, "samples": []})
            m["count"] += c["count"]
            m["total_s"] += c["total_s"]
            m["samples"] += c["samples"]
    if sampler:
        merged["waits"] = sampler.table()
    return merged


def merge_cpu(cpus: list) -> dict | None:
    """The clients' CPU figures of one run: client and backend CPU summed over the
    clients (None when a backend could not be read), the machine's busy CPU and
    the window's wall clock averaged (every client measured the same machine over
    nearly the same window)."""
    if not cpus or any(c is None for c in cpus):
        return None
    n = len(cpus)
    backends = [c["backend_s"] for c in cpus]
    machines = [c["machine_s"] for c in cpus]
    return {
        "wall_s": sum(c["wall_s"] for c in cpus) / n,
        "client_s": sum(c["client_s"] for c in cpus),
        "backend_s": None if None in backends else sum(backends),
        "machine_s": None if None in machines else sum(machines) / n,
    }


def cpu_per_message(cpu: dict | None, consumed: int) -> dict | None:
    """µs of CPU per consumed message: the clients, their backends, the rest of
    the machine (other backends: autovacuum, WAL writer, checkpointer; and the
    benchmark's own main process), and the machine's cores kept busy."""
    if not cpu or consumed <= 0:
        return None
    out = {"client_us": 1e6 * cpu["client_s"] / consumed, "backend_us": None, "other_us": None,
           "total_us": None, "cores_busy": None}
    if cpu["backend_s"] is not None:
        out["backend_us"] = 1e6 * cpu["backend_s"] / consumed
    if cpu["machine_s"] is not None:
        out["total_us"] = 1e6 * cpu["machine_s"] / consumed
        out["cores_busy"] = cpu["machine_s"] / cpu["wall_s"] if cpu["wall_s"] > 0 else None
        if out["backend_us"] is not None:
            out["other_us"] = out["total_us"] - out["client_us"] - out["backend_us"]
    return out


def _pct(values: list, q: float):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def summarise(v: Variant, n: int, raw: dict, duration: float, version: str | None = None) -> dict:
    lat = raw["latency_us"]
    calls = {
        k: {
            "count": c["count"],
            "mean_ms": 1000 * c["total_s"] / c["count"] if c["count"] else None,
            "p50_ms": 1000 * _pct(c["samples"], 0.5) if c["samples"] else None,
            "p99_ms": 1000 * _pct(c["samples"], 0.99) if c["samples"] else None,
        }
        for k, c in raw["calls"].items()
    }
    return {
        "variant": v.key,
        "group": v.group,
        "title": v.title,
        "clients": n,
        "version": version,
        "backlog": v.backlog,
        "batch": v.workload.batch,
        "consumed": raw["consumed"],
        "msgs_per_s": raw["consumed"] / duration,
        "empty": raw["empty"],
        "errors": raw["errors"],
        "error_samples": raw["error_samples"][:3],
        "latency": {
            "samples": len(lat),
            "p50_ms": _pct(lat, 0.5) / 1000 if lat else None,
            "p90_ms": _pct(lat, 0.9) / 1000 if lat else None,
            "p99_ms": _pct(lat, 0.99) / 1000 if lat else None,
            "max_ms": max(lat) / 1000 if lat else None,
        },
        "client_calls": calls,
        "cpu_per_msg": cpu_per_message(raw.get("cpu"), raw["consumed"]),
    }


# --------------------------------------------------------------------- the run

def fingerprint(conn) -> str:
    """md5 of every lonnymq function's signature, result, language, security and
    body, as installed in this database; not of the planner settings that
    sql/src/access/entry_point_settings.sql gives the entry points, which only
    an extension's members get (head_fingerprint installs the sources as a plain
    schema: with them, every build read as "not HEAD's")."""
    return conn.execute(
        """
        SELECT left(md5(string_agg(
            concat_ws(' ', p.oid::regprocedure, pg_get_function_result(p.oid), p.prolang, p.prosecdef, p.prosrc),
            '' ORDER BY p.oid::regprocedure::text)), 12)
        FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
        WHERE n.nspname = 'lonnymq'
        """
    ).fetchone()[0] or "?"


def head_fingerprint(target: "Target") -> str | None:
    """The fingerprint of the extension as committed (HEAD's sql/src/, which make
    concatenates into the install script), when this checkout has it: installed in a
    scratch database of the same server."""
    try:
        files = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", "HEAD", "sql/src/"],
                               capture_output=True, text=True)
        names = sorted((n for n in files.stdout.split() if n.endswith(".sql")),
                       key=lambda n: n.rsplit("/", 1)[-1].encode())
        if files.returncode != 0 or not names:
            return None
        script = subprocess.run(["git", "-C", str(ROOT), "show", *(f"HEAD:{n}" for n in names)],
                                capture_output=True, text=True)
        if script.returncode != 0:
            return None
        body = "\n".join(line for line in script.stdout.splitlines() if not line.startswith("\\echo"))
        body = body.replace("@extschema@", "lonnymq")
        # only callable from CREATE EXTENSION, and irrelevant to the functions
        body = re.sub(r"SELECT pg_catalog\.pg_extension_config_dump\([^;]*\);", "", body)
        with target.connect() as conn:
            conn.execute("DROP SCHEMA IF EXISTS lonnymq CASCADE")
            conn.execute("DROP EXTENSION IF EXISTS lonnymq CASCADE")
            conn.execute("CREATE SCHEMA lonnymq")
            conn.execute(body)
            fp = fingerprint(conn)
            conn.execute("DROP SCHEMA lonnymq CASCADE")
        return fp
    except (OSError, psycopg.Error):
        return None


def prepare(conn, v: Variant, version: str | None = None) -> None:
    if v.baseline:
        reset_baseline(conn, floor=v.workload.kind in ("floor", "floor_worker"))
        if v.setup:  # a backlog in the plain table (held snapshot)
            v.setup(conn, v)
            vacuum_queue(conn, True)
        return
    reset_lonnymq(conn, version)
    if v.setup:
        v.setup(conn, v)
    vacuum_queue(conn, False)


def checkpoint(conn) -> None:
    try:
        conn.execute("CHECKPOINT")
    except psycopg.Error:
        pass


def explain_set(dsn: str, label: str, channel: str = "bench") -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of every statement inside one create, one dequeue and
    one complete, in the current state of the database."""
    from bench.clients import CONTENT_NOW
    from lonnymq_dev.limits import LOCK_MS

    return prof.explain_calls(dsn, label, [
        (f"SELECT lonnymq.message_create(%s, {CONTENT_NOW})", (channel,)),
        ("SELECT d.id, d.num_attempts FROM lonnymq.message_dequeue(%s, 1) AS d", (LOCK_MS,)),
        ("SELECT lonnymq.message_complete(%s, %s)",
         lambda results: tuple(results[1][0]) if results[1] else (0, 0)),
    ])


def loadgen_pass(target: "Target", args) -> dict:
    """Producers and consumers as Spark tasks (pipeline.loadgen) against the
    bench server: the client count is not limited by this process."""
    from pipeline import LoadgenConfig, get_spark, run_loadgen

    producers, consumers = (int(x) for x in args.loadgen.split("+"))
    with target.connect() as conn:
        reset_lonnymq(conn, (args.versions or [None])[-1])
    master = args.loadgen_master or f"local[{producers + consumers}]"
    log(f"  [loadgen] {producers} producer(s) + {consumers} consumer(s) as Spark tasks ({master})")
    spark = get_spark(master)
    try:
        res = run_loadgen(spark, target.dsn, LoadgenConfig(
            producers=producers, consumers=consumers, channels=max(1, consumers),
            duration_s=args.duration))
    finally:
        spark.stop()
    log(f"    loadgen: produced {res['produce_rate']:,.0f} msg/s, completed {res['complete_rate']:,.0f} msg/s,"
        f" all completed: {res['all_completed']}")
    return {"producers": producers, "consumers": consumers, "master": master,
            **{k: res[k] for k in ("created", "completed", "produce_rate", "complete_rate",
                                   "all_completed", "drain_s", "per_second")}}


def loadgen_markdown(lg: dict) -> str:
    rows = "\n".join(f"| {p['second']} | {p['phase']} | {p['produced']:,} | {p['completed']:,} |"
                     for p in lg["per_second"])
    return (f"\n## Distributed load (Spark tasks)\n\n"
            f"{lg['producers']} producers and {lg['consumers']} consumers as Spark tasks ({lg['master']}), "
            f"unbatched, one channel per consumer: {lg['produce_rate']:,.0f} msg/s produced, "
            f"{lg['complete_rate']:,.0f} msg/s completed; {lg['created']:,} created, {lg['completed']:,} "
            f"completed, all completed: {lg['all_completed']} (drain {lg['drain_s']:.1f} s).\n\n"
            f"| second | phase | produced | completed |\n|---|---|---|---|\n{rows}\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    variants = select(catalogue(args.backlogs, args.saturated), args.scenarios)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    n_held = sum(len(versions_of(v, args)) for v in variants if v.group == HELD_GROUP)
    n_runs = sum(len(versions_of(v, args)) for v in variants if v.group != HELD_GROUP) * len(args.clients)
    per_run = args.warmup + args.duration + 2
    per_held = args.warmup + args.hold_before + args.hold + held.TAIL_S + 5
    parts = [f"{sum(v.group != HELD_GROUP for v in variants)} variant(s) x clients {args.clients}"
             + (f" x versions {args.versions}" if args.versions else "") + f" = {n_runs} runs of "
             f"{args.warmup:g} s warm-up + {args.duration:g} s"] if n_runs else []
    if n_held:
        parts.append(f"{n_held} held-snapshot run(s) of {per_held:.0f} s at {held.HELD_CLIENTS} clients")
    log(f"lonnymq bench: {', '.join(parts)}; about {(n_runs * per_run + n_held * per_held) / 60:.0f} min "
        "plus fixtures")

    target = Target(args.settings)
    t_start = time.monotonic()
    runs: list[dict] = []
    held_runs: list[dict] = []
    latencies: dict = {}
    profile: dict = {}
    try:
        target.start()
        with target.connect() as conn:
            pgss = prof.has_pgss(conn)
            env = environment(conn, args, target)
        log(f"  server: {env['server_version']} ({target.where}); pg_stat_statements: "
            f"{'yes' if pgss else 'no'}")
        k = 0
        for v in variants:
            log(f"  [{v.group}] {v.key}: {v.title}")
            if v.group == HELD_GROUP:  # one long run at a fixed client count, not one per count
                held_runs += [held_run(target, args, v, t_start, ver) for ver in versions_of(v, args)]
                continue
            for (ci, n), ver in product(enumerate(args.clients), versions_of(v, args)):
                k += 1
                with target.connect() as conn:
                    t_prep = time.monotonic()
                    # several versions: each run needs its own extension, so its own fixture
                    if v.fresh_per_run or ci == 0 or ver is not None:
                        prepare(conn, v, ver)
                    else:
                        vacuum_queue(conn, v.baseline)
                    if time.monotonic() - t_prep > 2:
                        log(f"    fixture ready in {time.monotonic() - t_prep:.1f} s")
                    checkpoint(conn)
                    prof.reset_stats(conn, pgss)
                label = f"[{k}/{n_runs}] {v.key}{at(ver)} x{n}"
                raw = run_clients(target.dsn, v.workload, n, args.warmup, args.duration, label)
                wait_stats_flush()
                res = summarise(v, n, raw, args.duration, ver)
                with target.connect() as conn:
                    res["server_calls"] = prof.server_call_times(conn, pgss)
                    res["tables"] = prof.table_stats(conn, v.baseline)
                    if not v.baseline:
                        res["build"] = fingerprint(conn)
                latencies[(v.key, n)] = raw["latency_us"]  # several versions: the last one's
                runs.append(res)
                lat = res["latency"]
                log(f"    {label}: {res['msgs_per_s']:8,.0f} msg/s"
                    f"  p50 {report.fmt_ms(lat['p50_ms'])} p99 {report.fmt_ms(lat['p99_ms'])}"
                    f"  empty {res['empty']:,}  errors {res['errors']:,}"
                    f"  dead {res['tables']['dead']:,}  size {report.fmt_bytes(res['tables']['bytes'])}"
                    f"  ({(time.monotonic() - t_start) / 60:.1f} min)")
                if res["errors"]:
                    log(f"      errors: {res['error_samples']}")
            if args.profile and v.key.startswith("backlog_") and not v.key.endswith("_future") \
                    and v.backlog == max(args.backlogs):
                with target.connect() as conn:
                    vacuum_queue(conn, False)
                profile.setdefault("plans", []).append(explain_set(target.dsn, f"{v.title}"))
        rounds = rounds_pass(target, args, variants)
        sync_off = sync_off_pass(target, args, variants) if args.sync_off else {}
        if args.loadgen:
            profile["loadgen"] = loadgen_pass(target, args)
        if args.profile:
            passed = profile_pass(target, args, pgss, variants)
            plans = passed.pop("plans", []) + profile.get("plans", [])
            profile.update(passed)
            profile["plans"] = plans
        # Which lonnymq was measured: CREATE EXTENSION reads the installed script
        # at every scenario, so a reinstall during the run would mix versions.
        measured = runs + held_runs + rounds.get("runs", [])
        by_version = {ver or "": sorted({r["build"] for r in measured if r.get("build") and r["version"] == ver})
                      for ver in args.versions or [None]}
        builds = sorted({b for bs in by_version.values() for b in bs})
        env["builds"] = builds
        env["head_build"] = head_fingerprint(target) if builds and not args.versions else None
        if args.versions:
            env["builds_by_version"] = by_version
        if any(len(bs) > 1 for bs in by_version.values()):
            log(f"  WARNING: the installed lonnymq changed during the run: {by_version}")
        env["finished"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        env["load_end"] = os.getloadavg()
        env["wall_min"] = (time.monotonic() - t_start) / 60
    finally:
        target.stop()

    data = {"env": env, "runs": runs, "profile": profile, "groups": GROUPS, "rounds": rounds,
            "sync_off": sync_off}
    if held_runs:
        data["held"] = {"clients": held.HELD_CLIENTS, "window_s": held.RATE_WINDOW_S,
                        "probe_every_s": held.PROBE_EVERY_S, "tail_s": held.TAIL_S,
                        "snapshot_sql": list(held.SNAPSHOT_SQL),
                        "runs": held_runs}
    base = out_dir / args.name
    (base.parent / f"{base.name}.json").write_text(json.dumps(data, indent=1, default=str))
    plots = {} if args.no_plots else report.plots(data, latencies, base)
    md = report.markdown(data, plots, args)
    if profile.get("loadgen"):
        md += loadgen_markdown(profile["loadgen"])
    md_path = base.parent / f"{base.name}.md"
    md_path.write_text(md)
    if profile:
        (base.parent / f"{base.name}-profile.md").write_text(report.profile_markdown(data))
    log(f"report: {md_path}")
    for t in report.targets(data):
        log(f"  {t['status']:<4}  {t['name']}: {t['measured']}  (target {t['required']})")
    return 0


def versions_of(v: Variant, args) -> list:
    """The versions a variant runs at: each of BENCH_VERSIONS for lonnymq's, else
    None (the default version, or a baseline, which has none)."""
    return [None] if v.baseline else args.versions or [None]


def at(version: str | None) -> str:
    """A run's label suffix: its extension version (BENCH_VERSIONS)."""
    return f"@{version}" if version else ""


def held_run(target: Target, args, v: Variant, t_start: float, version: str | None = None) -> dict:
    """Scenario 6 for one variant: a fresh fixture, then held.HELD_CLIENTS clients
    for warm-up + BENCH_HOLD_BEFORE + BENCH_HOLD seconds (+ a short tail) while
    held.HeldTimeline holds the snapshot, probes and counts (bench/held.py)."""
    n = held.HELD_CLIENTS
    with target.connect() as conn:
        t_prep = time.monotonic()
        prepare(conn, v, version)
        log(f"    fixture ready in {time.monotonic() - t_prep:.1f} s")
        checkpoint(conn)
    timeline = held.HeldTimeline(target.dsn, held.probe_sql(v.baseline, v.workload.batch), args.warmup,
                                 args.hold_before, args.hold, v.baseline, log)
    label = f"[held] {v.key}{at(version)} x{n}"
    duration = args.hold_before + args.hold + held.TAIL_S
    try:
        raw = run_clients(target.dsn, v.workload, n, args.warmup, duration, label, observer=timeline)
    finally:
        timeline.stop()
    wait_stats_flush()
    res = {"variant": v.key, "group": v.group, "title": v.title, "clients": n, "version": version,
           "batch": v.workload.batch,
           "backlog": v.backlog, "baseline": v.baseline, "consumed": raw["consumed"], "empty": raw["empty"],
           "errors": raw["errors"], "error_samples": raw["error_samples"][:3], **timeline.result()}
    with target.connect() as conn:
        res["tables_after"] = prof.table_stats(conn, v.baseline)
        if not v.baseline:
            res["build"] = fingerprint(conn)
    log(f"    {label}: {report.fmt_rate(res['rate_before'])} msg/s before, {report.fmt_rate(res['rate_end'])} "
        f"in the last {res['window_end_s'] or 0:.0f} s of the hold ({report.fmt_ratio(res['rate_ratio'])} x); "
        f"buffers per dequeue {res['buffers_before']} -> {res['buffers_end']} "
        f"({report.fmt_ratio(res['buffers_ratio'])} x); errors {res['errors']:,}"
        f"  ({(time.monotonic() - t_start) / 60:.1f} min)")
    if res["errors"]:
        log(f"      errors: {res['error_samples']}")
    return res


# The variants whose throughput ratios are targets, in the order each round runs them.
ROUND_KEYS = ("baseline_amo", "baseline_floor", "baseline_floor_worker", "lifecycle_1ch", "lifecycle_64ch", "lifecycle_64ch_mc2", "batch_100",
              "worker_1ch", "worker_64ch", "worker_batch_100")
ROUND_CLIENTS = 8


def rounds_pass(target: Target, args, variants: list[Variant]) -> dict:
    """BENCH_ROUNDS more runs of each target variant at 8 clients, interleaved
    (all variants once, then again; with BENCH_VERSIONS every selected variant
    but the held snapshot, each lonnymq one once per version, one version right
    after the other): {"clients": 8, "runs": [every run], "msgs_per_s": {key:
    [per round]}}, the latter of the last version (and the baselines)."""
    if args.versions:
        chosen = [v for v in variants if v.group != HELD_GROUP]
    else:
        chosen = [v for k in ROUND_KEYS for v in variants if v.key == k]
    if args.rounds <= 0 or ROUND_CLIENTS not in args.clients or len(chosen) < (1 if args.versions else 2):
        return {}
    last = (args.versions or [None])[-1]
    out: dict = {"clients": ROUND_CLIENTS, "msgs_per_s": {v.key: [] for v in chosen}, "runs": []}
    for r in range(args.rounds):
        for v in chosen:
            for ver in versions_of(v, args):
                with target.connect() as conn:
                    prepare(conn, v, ver)
                    checkpoint(conn)
                label = f"[round {r + 1}/{args.rounds}] {v.key}{at(ver)} x{ROUND_CLIENTS}"
                raw = run_clients(target.dsn, v.workload, ROUND_CLIENTS, args.warmup, args.duration, label)
                res = summarise(v, ROUND_CLIENTS, raw, args.duration, ver)
                with target.connect() as conn:
                    build = None if v.baseline else fingerprint(conn)
                out["runs"].append({"round": r + 1, "variant": v.key, "version": ver, "build": build,
                                    **{k: res[k] for k in ("msgs_per_s", "empty", "errors", "error_samples")}})
                if ver in (None, last):
                    out["msgs_per_s"][v.key].append(res["msgs_per_s"])
                log(f"    {label}: {res['msgs_per_s']:8,.0f} msg/s  empty {res['empty']:,}  errors {res['errors']:,}")
                if res["errors"]:
                    log(f"      errors: {res['error_samples']}")
    return out


def sync_off_pass(target: Target, args, variants: list[Variant]) -> dict:
    """The target variants once more at 8 clients (each version in turn), with
    synchronous_commit off in every client session: {"clients": 8, "runs":
    [summaries]}, for the CPU comparison."""
    chosen = [v for k in ROUND_KEYS for v in variants if v.key == k]
    if ROUND_CLIENTS not in args.clients or not chosen:
        return {}
    out: dict = {"clients": ROUND_CLIENTS, "runs": []}
    for v in chosen:
        wl = replace(v.workload, session_sql=v.workload.session_sql + ("SET synchronous_commit = off",))
        for ver in versions_of(v, args):
            with target.connect() as conn:
                prepare(conn, v, ver)
                checkpoint(conn)
            label = f"[synchronous_commit off] {v.key}{at(ver)} x{ROUND_CLIENTS}"
            raw = run_clients(target.dsn, wl, ROUND_CLIENTS, args.warmup, args.duration, label)
            res = summarise(v, ROUND_CLIENTS, raw, args.duration, ver)
            out["runs"].append(res)
            log(f"    {label}: {res['msgs_per_s']:8,.0f} msg/s  errors {res['errors']:,}")
    return out


def profile_pass(target: Target, args, pgss: bool, variants: list[Variant]) -> dict:
    """8 clients (or the largest count below it) of the one-channel and 64-channel
    lifecycles and the at-most-once baseline, with pg_stat_statements.track = all,
    track_functions = pl and wait-event sampling; then auto_explain plans."""
    n = 8 if 8 in args.clients else max(args.clients)
    keys = {v.key: v for v in variants}
    wanted = [k for k in ("lifecycle_1ch", "lifecycle_64ch", "lifecycle_64ch_mc2", "baseline_amo") if k in keys]
    out: dict = {"clients": n, "runs": []}
    log(f"  profiling pass at {n} clients: {', '.join(wanted)}")
    for key in wanted:
        v = keys[key]
        with target.connect() as conn:
            prepare(conn, v, (args.versions or [None])[-1])
            checkpoint(conn)
            prof.reset_stats(conn, pgss)
        wl = Workload(v.workload.kind, v.workload.channels, v.workload.batch, prof.PROFILE_SESSION_SQL)
        raw = run_clients(target.dsn, wl, n, args.warmup, args.duration, f"profile {key} x{n}",
                          sampler_dsn=target.dsn)
        wait_stats_flush()
        res = summarise(v, n, raw, args.duration)
        with target.connect() as conn:
            entry = {
                "variant": key,
                "title": v.title,
                "msgs_per_s": res["msgs_per_s"],
                "empty": res["empty"],
                "client_calls": res["client_calls"],
                "waits": raw.get("waits", []),
                "statements": prof.statement_profile(conn) if pgss else [],
                "functions": prof.function_profile(conn),
                "tables": prof.table_stats(conn, v.baseline),
            }
        out["runs"].append(entry)
        log(f"    profile {key}: {res['msgs_per_s']:,.0f} msg/s with profiling on")
        if key == "lifecycle_1ch":
            out.setdefault("plans", []).insert(0, explain_set(target.dsn, "one channel, after the run"))
    return out


if __name__ == "__main__":
    sys.exit(main())
