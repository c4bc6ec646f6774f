"""History export at scale: `pipeline.export` against a plain Spark JDBC read.

Fills lonnymq.message_history with ROWS generated rows (one INSERT ... SELECT
from generate_series: JSON contents of about 100 bytes, five channels of
uneven size, 70 % with a key, 5 % with a state, 1 to 5 attempts, exponential
create-to-complete latencies plus a second of backoff per retry), empties
lonnymq.dead_letter, then times interleaved rounds (the order rotates from
round to round, after one unmeasured warm-up of each) of

    jdbc           spark.read.format("jdbc") of message_history with the
                   PostgreSQL JDBC driver, written to Parquet: the floor
    export tables  pipeline.export.export_tables: both tables to Parquet in
                   one exported snapshot (export without summary and charts)
    export         pipeline.export.export, whole: the Parquet, summary.json
                   and the two PNG charts

all with the same Spark session, partitions (the export's default for the id
range), fetch size and Parquet output. Reported: median seconds, rows/s, the
ratio to jdbc, and the CPU seconds of this process, the Spark driver JVM and
its children (in local mode, every executor and Python worker; the server's
CPU is not counted), which a neighbour on a shared machine disturbs less
than wall time.

JDBC cannot open a Unix-domain socket: a DSN over one is run over TCP to
127.0.0.1 at the same port (a lonnymq_dev private cluster listens there too).
The extension is created in the database when missing; the two tables'
contents are replaced (refused when they hold rows of channels that are not
the benchmark's).

    .venv/bin/python -m bench.pipeline_export --dsn "host=127.0.0.1 dbname=bench" --rows 1000000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from lonnymq_dev.spark_cluster import process_tree

CHANNELS = ("bench-orders", "bench-orders", "bench-orders", "bench-emails", "bench-emails",
            "bench-webhooks", "bench-invoices", "bench-audit")  # a row's channel: CHANNELS[id % 8]
TARGET_RATIO = 1.5  # export tables / jdbc, at most
EPOCH_MS = 1_767_225_600_000  # 2026-01-01, the first message's created_at

# :rows rows, ids 1..:rows. random() after setseed, so every fill is the same.
FILL_SQL = """
INSERT INTO lonnymq.message_history
    (id, channel, key, content, state, num_attempts, created_at, completed_at)
SELECT g.i,
       (%(channels)s::text[])[1 + g.i %% 8],
       CASE WHEN g.i %% 10 < 7 THEN 'evt-' || lpad(to_hex(g.i * 2654435761 %% 4294967296), 8, '0') END,
       convert_to(format('{"order_id": %%s, "customer": "c-%%s", "amount_cents": %%s, "items": %%s, "note": "%%s"}',
                         g.i, lpad((g.i * 7919 %% 50000)::text, 5, '0'), (g.u1 * 100000)::int,
                         1 + (g.u2 * 9)::int, substr(md5(g.i::text), 1, 16)), 'UTF8'),
       CASE WHEN g.i %% 20 = 0 THEN convert_to(format('{"step": %%s}', g.i %% 5), 'UTF8') END,
       a.attempts,
       %(epoch)s + g.i * 3,
       %(epoch)s + g.i * 3 + (-ln(1 - g.u3) * 150)::bigint + (a.attempts - 1) * 1000
FROM (SELECT i, random() AS u1, random() AS u2, random() AS u3, random() AS u4
      FROM generate_series(1::bigint, %(rows)s) AS i) AS g
CROSS JOIN LATERAL (SELECT CASE WHEN g.u4 < 0.85 THEN 1 WHEN g.u4 < 0.95 THEN 2 WHEN g.u4 < 0.99 THEN 3
                                ELSE 4 + (g.i %% 2)::int END AS attempts) AS a
"""


def log(msg: str) -> None:
    print(f"[export bench] {msg}", file=sys.stderr, flush=True)


def tcp_dsn(dsn: str) -> str:
    """``dsn`` when it connects over TCP, else the same server, database and user
    over TCP to 127.0.0.1 at the same port."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        host, port = conn.info.host, conn.info.port
    if not host.startswith(("/", "@")):
        return dsn
    tcp = make_conninfo(dsn, host="127.0.0.1", port=str(port))
    try:
        psycopg.connect(tcp, connect_timeout=10).close()
    except psycopg.Error as exc:
        raise RuntimeError(f"the export benchmark needs TCP (JDBC cannot open a Unix-domain socket), "
                           f"and 127.0.0.1:{port} does not answer: {exc}; pass a DSN with a TCP host") from exc
    return tcp


def fill_history(dsn: str, rows: int) -> None:
    """message_history := ``rows`` generated rows, dead_letter emptied, both vacuumed
    (frozen and hinted, so that no round pays for the first read of fresh pages)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS lonnymq")
        foreign = conn.execute(
            "SELECT (SELECT count(*) FROM lonnymq.message_history WHERE channel <> ALL(%(ch)s))"
            "     + (SELECT count(*) FROM lonnymq.dead_letter WHERE channel <> ALL(%(ch)s))",
            {"ch": list(CHANNELS)}).fetchone()[0]
        if foreign:
            raise RuntimeError(f"lonnymq.message_history / dead_letter hold {foreign} row(s) of channels "
                               "that are not the benchmark's: not a benchmark database, left alone")
        with conn.transaction():
            conn.execute("SELECT setseed(0.42)")
            conn.execute("TRUNCATE lonnymq.message_history, lonnymq.dead_letter")
            conn.execute(FILL_SQL, {"channels": list(CHANNELS), "epoch": EPOCH_MS, "rows": rows})
        conn.execute("VACUUM (FREEZE, ANALYZE) lonnymq.message_history, lonnymq.dead_letter")


def _process_tree_cpu(root: int) -> float:
    """CPU seconds (user + system, children waited for included) of process ``root``
    and its live descendants, from /proc."""
    ticks = 0
    for pid in process_tree(root):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)"
        except OSError:
            continue  # exited meanwhile
        ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def run_export_bench(dsn: str, rows: int = 1_000_000, rounds: int = 3, *, out_dir: Path,
                     master: str = "local[*]") -> dict:
    """Fill message_history with ``rows`` rows and time ``rounds`` interleaved rounds of
    the plain JDBC read -> Parquet, export_tables and the whole export (see the module
    docstring); outputs under ``out_dir``. Uses the active SparkSession if there is
    one (through pipeline.get_spark), else starts one on ``master`` and stops it."""
    from pyspark.sql import SparkSession

    from pipeline import get_spark, resolve_dsn
    from pipeline.common import Progress
    from pipeline.export import (
        FETCH_ROWS, default_partitions, ensure_jdbc_driver, export, export_tables, jdbc_options)

    dsn = tcp_dsn(resolve_dsn(dsn))
    out_dir = Path(out_dir)
    t = time.perf_counter()
    fill_history(dsn, rows)
    fill_seconds = time.perf_counter() - t
    log(f"{rows:,} rows in lonnymq.message_history ({fill_seconds:.1f}s)")
    with psycopg.connect(dsn) as conn:
        jdbc = jdbc_options(conn.info, dsn)
        server = conn.execute("SHOW server_version").fetchone()[0]
    assert jdbc is not None  # tcp_dsn

    started_here = SparkSession.getActiveSession() is None
    spark = get_spark(master if started_here else None)
    try:
        sc = spark.sparkContext
        jvm_pid = int(sc._jvm.java.lang.ProcessHandle.current().pid())
        partitions = default_partitions(spark, 1, rows)
        quiet = Progress("export", quiet=True)

        def plain_jdbc() -> None:
            ensure_jdbc_driver(spark)
            with psycopg.connect(dsn) as conn:
                lo, hi = conn.execute("SELECT min(id), max(id) FROM lonnymq.message_history").fetchone()
            (spark.read.format("jdbc").options(**jdbc)
             .option("dbtable", "lonnymq.message_history")
             .option("partitionColumn", "id").option("lowerBound", str(lo)).option("upperBound", str(hi + 1))
             .option("numPartitions", str(partitions)).option("fetchsize", str(FETCH_ROWS))
             .load().write.mode("overwrite").parquet(str(out_dir / "jdbc")))

        variants: dict[str, tuple[str, Callable[[], None]]] = {
            "jdbc": ("plain Spark JDBC read -> Parquet", plain_jdbc),
            "export_tables": ("export_tables (table -> Parquet, one snapshot)",
                              lambda: export_tables(spark, dsn, out_dir / "export_tables",
                                                    partitions=partitions, progress=quiet)),
            "export": ("export, whole (+ summary, charts)",
                       lambda: export(spark, dsn, out_dir / "export", partitions=partitions, progress=quiet)),
        }
        names = list(variants)
        seconds: dict[str, list[float]] = {k: [] for k in names}
        cpu: dict[str, list[float]] = {k: [] for k in names}

        def timed(name: str) -> tuple[float, float]:
            cpu0 = _process_tree_cpu(jvm_pid) + time.process_time()
            t0 = time.perf_counter()
            variants[name][1]()
            wall = time.perf_counter() - t0
            return wall, _process_tree_cpu(jvm_pid) + time.process_time() - cpu0

        for name in names:
            log(f"warm-up {name}: {timed(name)[0]:.2f}s")
        for rnd in range(rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for name in order:
                wall, cpu_s = timed(name)
                seconds[name].append(wall)
                cpu[name].append(cpu_s)
                log(f"round {rnd + 1}/{rounds} {name}: {wall:.2f}s, {rows / wall:,.0f} rows/s, CPU {cpu_s:.2f}s")
        master_used, spark_version, slots = sc.master, spark.version, sc.defaultParallelism
    finally:
        if started_here:
            spark.stop()

    floor = statistics.median(seconds["jdbc"])
    results = {}
    for name in names:
        med = statistics.median(seconds[name])
        results[name] = {
            "label": variants[name][0], "seconds": seconds[name], "cpu_seconds": cpu[name],
            "median_s": med, "rows_per_s": rows / med, "ratio_to_jdbc": med / floor,
            "median_cpu_s": statistics.median(cpu[name]),
        }
    return {
        "rows": rows, "rounds": rounds, "partitions": partitions, "fetch_rows": FETCH_ROWS,
        "master": master_used, "task_slots": slots, "spark": spark_version, "server": server,
        "fill_seconds": fill_seconds, "target_ratio": TARGET_RATIO, "variants": results,
        "ratio_tables": results["export_tables"]["ratio_to_jdbc"],
        "ratio_whole": results["export"]["ratio_to_jdbc"],
    }


def render_markdown(result: dict) -> str:
    """The result of run_export_bench as a markdown section."""
    r = result
    lines = [
        f"## History export: {r['rows']:,} rows of message_history to Parquet",
        "",
        f"Spark {r['spark']} ({r['master']}, {r['task_slots']} task slots), PostgreSQL {r['server']} over TCP, "
        f"{r['partitions']} read partitions, fetch size {r['fetch_rows']:,}; medians of {r['rounds']} interleaved "
        f"rounds after a warm-up. CPU: this process and the Spark JVM with its children (not the server's).",
        "",
        "| variant | median s | rows/s | / jdbc | median CPU s | seconds per round |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for v in r["variants"].values():
        lines.append(f"| {v['label']} | {v['median_s']:.2f} | {v['rows_per_s']:,.0f} | {v['ratio_to_jdbc']:.2f} "
                     f"| {v['median_cpu_s']:.2f} | {', '.join(f'{s:.2f}' for s in v['seconds'])} |")
    verdict = "PASS" if r["ratio_tables"] <= r["target_ratio"] else "MISS"
    lines += ["", f"Target: export tables / jdbc <= {r['target_ratio']}: {r['ratio_tables']:.2f}, {verdict} "
                  f"(the whole export, with summary and charts: {r['ratio_whole']:.2f})."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", help="libpq connection string (default: the PG* environment variables)")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--master", default="local[*]", help="Spark master (local[*])")
    p.add_argument("--out", type=Path, help="output directory (default: a temporary one, removed afterwards)")
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.out:
        result = run_export_bench(args.dsn or "", args.rows, args.rounds, out_dir=args.out, master=args.master)
    else:
        with tempfile.TemporaryDirectory(prefix="lonnymq-export-bench-") as tmp:
            result = run_export_bench(args.dsn or "", args.rows, args.rounds, out_dir=Path(tmp), master=args.master)
    print(render_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
