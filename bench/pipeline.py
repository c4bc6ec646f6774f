"""The Spark pipeline against direct loops, side by side in one run.

On a private cluster (or PGHOST/PGPORT), in one run, interleaved rounds:

1. Keyed creates.  One psycopg process calls message_create_batch with
   1,000 messages a call and commits each call, unkeyed and keyed (new
   keys), on the previous release and on this version, synchronous_commit
   on and off: messages/s and keyed / unkeyed.
2. Enqueue.  The same rows (the sample dataset, pipeline/sample.py, keyed by
   its event_id) written by `pipeline.enqueue` on local[2] with 2 and 4
   partitions, and by the direct keyed loop of (1) from one process (its
   messages prepared beforehand, so the loop is the database's time alone):
   rows/s and loop / pipeline.
3. Export (bench/pipeline_export.py): the history of --export-rows rows to
   Parquet by `pipeline.export`, against a plain Spark JDBC read of the
   same table written to Parquet.

Medians of --rounds rounds.  Writes bench/results/<name>.md and .json.

    .venv/bin/python -m bench.pipeline [--rows 200000] [--rounds 3] [--export-rows 1000000] [--name NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg import sql

from bench.run import ROOT, Target, log

CALL = 1000  # messages per message_create_batch call, one commit each
CREATE_SQL = ("SELECT count(*) FROM lonnymq.message_create_batch("
              "%b::text, %b::bytea[], NULL, %b::text[])")
RELEASED = ROOT / "test" / "python" / "upgrade" / "released_schemas.txt"


def previous_release(current: str) -> str:
    """The newest released version before `current` (released_schemas.txt lists
    them in order, and holds `current` too once it is released)."""
    released = [ln.split()[0] for ln in RELEASED.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return [v for v in released if v != current][-1]


def database(admin, dsn: str, name: str, version: str | None) -> str:
    """A fresh database `name` with lonnymq at `version` (None: the default); its DSN."""
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    db_dsn = make_conninfo(dsn, dbname=name)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        if version:
            conn.execute(sql.SQL("CREATE EXTENSION lonnymq VERSION {}").format(sql.Literal(version)))
        else:
            conn.execute("CREATE EXTENSION lonnymq")
    return db_dsn


def empty(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE lonnymq.message, lonnymq.message_key")
        conn.execute("VACUUM ANALYZE lonnymq.message")


def create_loop(dsn: str, batches: list[tuple[str, list[bytes], list[str] | None]], sync: str) -> float:
    """message_create_batch for each (channel, contents, keys), one commit each: seconds."""
    with psycopg.connect(dsn, autocommit=False) as conn:
        conn.execute(sql.SQL("SET synchronous_commit = {}").format(sql.Literal(sync)))
        conn.commit()
        start = time.perf_counter()
        for channel, contents, keys in batches:
            conn.execute(CREATE_SQL, (channel, contents, keys))
            conn.commit()
        return time.perf_counter() - start


def calls_of(messages: list[tuple[str, bytes, str]], keyed: bool) -> list[tuple[str, list[bytes], list[str] | None]]:
    """The messages as calls of CALL messages of one channel each, in input order."""
    by_channel: dict[str, list[tuple[bytes, str]]] = {}
    for channel, content, key in messages:
        by_channel.setdefault(channel, []).append((content, key))
    calls = []
    for channel, items in by_channel.items():
        for i in range(0, len(items), CALL):
            chunk = items[i:i + CALL]
            calls.append((channel, [c for c, _ in chunk], [k for _, k in chunk] if keyed else None))
    return calls


def sample_messages(spark, path: Path) -> list[tuple[str, bytes, str]]:
    """The sample's rows as the pipeline makes them messages (pipeline.enqueue.prepare)."""
    from pipeline.enqueue import EnqueueSpec, prepare, read_input

    spec = EnqueueSpec(channel_col="channel", key_col="event_id")
    return [(r["channel"], bytes(r["content"]), r["key"])
            for r in prepare(read_input(spark, path), spec).toLocalIterator()]


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000, help="rows of the enqueue comparison (200000)")
    p.add_argument("--create-messages", type=int, default=100_000,
                   help="messages per run of the keyed-creates comparison (100000)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--export-rows", type=int, default=1_000_000, help="history rows to export (0 skips)")
    p.add_argument("--name", default=datetime.now().strftime("%Y-%m-%d") + "-pipeline")
    args = p.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pipeline import EnqueueSpec, enqueue, get_spark
    from pipeline.common import Progress
    from pipeline.enqueue import read_input
    from pipeline.sample import write_sample

    target = Target()
    target.start()
    spark = None
    # The sample and the export's Parquet (some 180 MB), removed at the end.
    tmp_dir = tempfile.TemporaryDirectory(prefix="lonnymq-bench-pipeline-")
    tmp = Path(tmp_dir.name)
    creates: dict[tuple[str, str, str], list[float]] = {}
    enqueues: dict[str, list[float]] = {}
    export_result = None
    try:
        with target.connect() as admin:
            server = admin.execute("SHOW server_version").fetchone()[0]
            current = admin.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'lonnymq'").fetchone()[0]
            previous = previous_release(current)
            dsns = {v: database(admin, target.dsn, f"bench_pipeline_{v.replace('.', '_')}", v)
                    for v in (previous, current)}
        spark = get_spark("local[2]", conf={"spark.sql.shuffle.partitions": "2"})
        sample = tmp / "events.parquet"
        write_sample(spark, sample, args.rows, poison=0, partitions=4)
        messages = sample_messages(spark, sample)
        log(f"{len(messages)} sample rows prepared")

        # The keyed-creates messages: the sample's, repeated with fresh keys as needed.
        pool = [(f"create-{i % 4}", m[1]) for i, m in enumerate(messages)]
        serial = [0]

        def fresh_calls(keyed: bool) -> list:
            out = []
            for i in range(args.create_messages):
                channel, content = pool[i % len(pool)]
                serial[0] += 1
                out.append((channel, content, f"create-{serial[0]:012d}"))
            return calls_of(out, keyed)

        for rnd in range(1, args.rounds + 1):
            for sync in ("on", "off"):
                for version in (previous, current):
                    for keyed in (False, True):
                        calls = fresh_calls(keyed)
                        empty(dsns[version])
                        seconds = create_loop(dsns[version], calls, sync)
                        rate = args.create_messages / seconds
                        creates.setdefault((sync, version, "keyed" if keyed else "unkeyed"), []).append(rate)
                        log(f"round {rnd}: creates, sync {sync}, {version}, "
                            f"{'keyed' if keyed else 'unkeyed'}: {rate:,.0f}/s")
            # Enqueue: the direct loop and the pipeline on the same rows, sync on.
            dsn = dsns[current]
            empty(dsn)
            rate = len(messages) / create_loop(dsn, calls_of(messages, True), "on")
            enqueues.setdefault("direct keyed loop, 1 process", []).append(rate)
            log(f"round {rnd}: direct keyed loop: {rate:,.0f} rows/s")
            for parts in (2, 4):
                empty(dsn)
                df = read_input(spark, sample)
                result = enqueue(spark, df, dsn, EnqueueSpec(channel_col="channel", key_col="event_id"),
                                 partitions=parts, progress=Progress("enqueue", quiet=True))
                assert result.messages == len(messages) and result.exit_code == 0, result.report()
                rate = len(messages) / result.seconds
                enqueues.setdefault(f"pipeline, local[2], {parts} partitions", []).append(rate)
                log(f"round {rnd}: pipeline, {parts} partitions: {rate:,.0f} rows/s")

        if args.export_rows:
            from bench.pipeline_export import run_export_bench

            export_result = run_export_bench(target.dsn, rows=args.export_rows, rounds=args.rounds,
                                             out_dir=tmp / "export")
    finally:
        if spark is not None:
            spark.stop()
        target.stop()
        tmp_dir.cleanup()

    report = render(args, server, previous, current, creates, enqueues, export_result)
    out = ROOT / "bench" / "results"
    (out / f"{args.name}.md").write_text(report)
    (out / f"{args.name}.json").write_text(json.dumps({
        "rows": args.rows, "create_messages": args.create_messages, "rounds": args.rounds,
        "previous": previous, "current": current, "server": server,
        "creates": {" | ".join(k): v for k, v in creates.items()},
        "enqueue": enqueues, "export": export_result,
    }, indent=2, default=str) + "\n")
    print(report)
    log(f"wrote bench/results/{args.name}.md")
    return 0


def render(args, server: str, previous: str, current: str, creates: dict, enqueues: dict,
           export_result: dict | None) -> str:
    lines = [
        f"# The Spark pipeline against direct loops ({datetime.now():%Y-%m-%d})",
        "",
        f"`python -m bench.pipeline --rows {args.rows} --create-messages {args.create_messages} "
        f"--rounds {args.rounds} --export-rows {args.export_rows}`: PostgreSQL {server}, "
        f"lonnymq {previous} (previous release) and {current}, one run, interleaved rounds, "
        "medians. The machine: 2 cores, shared.",
        "",
        f"## Keyed creates: message_create_batch, {CALL:,} a call, one commit each, one process",
        "",
        "| synchronous_commit | version | unkeyed msg/s | keyed msg/s | keyed / unkeyed |",
        "|---|---|---:|---:|---:|",
    ]
    for sync in ("on", "off"):
        for version in (previous, current):
            u = median(creates.get((sync, version, "unkeyed"), []))
            k = median(creates.get((sync, version, "keyed"), []))
            lines.append(f"| {sync} | {version} | {u:,.0f} | {k:,.0f} | {k / u:.2f} |")
    lines += [
        "",
        f"Per-round rates: {json.dumps({' | '.join(k): [round(x) for x in v] for k, v in creates.items()})}",
        "",
        f"## Enqueue: {args.rows:,} sample rows keyed by event_id, synchronous_commit on",
        "",
        "| writer | rows/s | direct loop / this |",
        "|---|---:|---:|",
    ]
    loop = median(enqueues.get("direct keyed loop, 1 process", []))
    for name, rates in enqueues.items():
        r = median(rates)
        lines.append(f"| {name} | {r:,.0f} | {loop / r:.2f} |")
    lines += ["", f"Per-round rates: {json.dumps({k: [round(x) for x in v] for k, v in enqueues.items()})}", ""]
    if export_result:
        from bench.pipeline_export import render_markdown

        lines += [render_markdown(export_result), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
