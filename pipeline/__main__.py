"""Command line: python -m pipeline {enqueue,export,loadgen,sample} ...

Run from the repository root. The server: --dsn, or the libpq environment
(PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD). Progress goes to stderr,
results to stdout.

Exit status: 0 done; 1 done, but not everything went through (enqueue: bad
rows or messages dropped at max_size; loadgen: not every created message was
completed); 2 usage, input or connection error (nothing written); 3 a Spark
job failed (enqueue: re-running the same command is safe, the keys make it
exactly-once).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .common import PipelineError, Progress, check_connection, resolve_dsn
from .spark import DEFAULT_MASTER

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_JOB_FAILED = 0, 1, 2, 3


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("connection and Spark")
    g.add_argument("--dsn", help="libpq connection string or URI (default: the PG* environment variables)")
    g.add_argument("--master", help=f"Spark master (default {DEFAULT_MASTER}; loadgen: local[producers+consumers]); "
                                    "local[N,F] retries failed tasks F-1 times")
    g.add_argument("--conf", type=_conf, action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark setting (repeatable)")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")

    parser = argparse.ArgumentParser(
        prog="python -m pipeline",
        description="lonnymq's Spark pipeline: exactly-once bulk enqueue, history export, load generation.",
        epilog="Exit status: 0 ok, 1 bad rows (or other rows not enqueued / messages not completed), "
               "2 usage or connection error, 3 a Spark job failed.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("enqueue", parents=[common], help="write rows of Parquet / CSV / JSON as messages",
                       description="Validate every row, then write each partition in one transaction "
                                   "through message_create_batch, with keys that make the write exactly-once.")
    p.add_argument("input", help="a file or directory of Parquet, CSV (with a header row) or JSON lines")
    p.add_argument("--format", choices=("parquet", "csv", "json"), help="default: from the extension")
    ch = p.add_mutually_exclusive_group(required=True)
    ch.add_argument("--channel", help="one channel for every row")
    ch.add_argument("--channel-col", metavar="COL", help="the column that names each row's channel")
    p.add_argument("--content-col", metavar="COL",
                   help="the content: binary as is, string as UTF-8, anything else as JSON "
                        "(default: the whole row without the channel column, as a JSON object)")
    p.add_argument("--content-json", action="store_true", help="serialise a string content column as JSON too")
    p.add_argument("--dequeue-at-col", metavar="COL", help="epoch ms (integer) or timestamp column; NULL = now")
    p.add_argument("--key-col", metavar="COL",
                   help="dedup key column (default: sha256 of the row's canonical JSON, "
                        "without the headers column)")
    p.add_argument("--headers-col", metavar="COL",
                   help="each message's headers (lonnymq 0.16.0): a map or struct column as a JSON object, "
                        "a string column as JSON text of an object; NULL = none; at most 64 KiB of jsonb text")
    p.add_argument("--batch-size", type=int, default=1000, help="messages per message_create_batch call (1000)")
    p.add_argument("--partitions", type=int, help="repartition first: one transaction per partition")
    p.add_argument("--skip-bad", action="store_true",
                   help="write the good rows even if some are bad (still reported, exit status 1)")
    p.add_argument("--fail-after-commit", action="store_true",
                   help="testing: make every task fail after its commit on its first attempt "
                        "(also LONNYMQ_PIPELINE_FAIL_AFTER_COMMIT=1); needs a retrying master such as local[2,4]")

    p = sub.add_parser("export", parents=[common], help="history and dead letters to Parquet, summary, charts")
    p.add_argument("--out", required=True, type=Path, help="output directory (history/, dead_letter/ overwritten)")
    p.add_argument("--channel", action="append", dest="channels", metavar="NAME", help="only this channel (repeatable)")
    p.add_argument("--partitions", type=int, help="read partitions per table (default: from the row count)")
    p.add_argument("--no-charts", action="store_true", help="skip the PNG charts")

    p = sub.add_parser("loadgen", parents=[common], help="producers and consumers as Spark tasks",
                       description="Producers create and consumers dequeue+complete on channels of their own "
                                   "for DURATION seconds, then drain; prints messages/s for each second.")
    p.add_argument("--producers", type=int, default=1)
    p.add_argument("--consumers", type=int, default=1)
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--duration", type=float, default=10.0, help="seconds of production (10)")
    p.add_argument("--produce-batch", type=int, default=1, help="messages per create call (>1: message_create_batch)")
    p.add_argument("--dequeue-batch", type=int, default=1, help="p_limit of message_dequeue (1)")
    p.add_argument("--payload-bytes", type=int, default=64)
    p.add_argument("--lock-ms", type=int, default=30_000)
    p.add_argument("--drain-timeout", type=float, default=60.0, help="seconds allowed for the drain (60)")
    p.add_argument("--prefix", default="loadgen", help="channel name prefix (loadgen)")
    p.add_argument("--keep-channels", action="store_true", help="do not drop the run's channels afterwards")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")

    p = sub.add_parser("sample", parents=[common], help="write a sample dataset of events")
    p.add_argument("--out", required=True, type=Path, help="output path (a directory of part files)")
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--format", choices=("parquet", "csv", "json"), help="default: from --out's extension, else parquet")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--poison", type=int, default=2, help="rows whose processing always fails (2)")
    p.add_argument("--partitions", type=int, default=4)
    return parser


def _run(args: argparse.Namespace) -> int:
    from .spark import get_spark

    progress = Progress(args.command, quiet=args.quiet)
    conf = dict(args.conf)
    master = args.master
    if master is None:
        master = f"local[{args.producers + args.consumers}]" if args.command == "loadgen" else DEFAULT_MASTER

    started: list[float] = []  # Spark's start-up, in seconds

    def start_spark():
        t0 = time.monotonic()
        spark = get_spark(master, conf=conf)
        started.append(time.monotonic() - t0)
        progress(f"Spark {spark.version} ready, {spark.sparkContext.defaultParallelism} task slot(s), "
                 f"in {started[0]:.1f}s")
        return spark

    if args.command == "sample":
        from .sample import write_sample

        spark = start_spark()
        try:
            out = write_sample(spark, args.out, args.rows, fmt=args.format, seed=args.seed,
                               poison=args.poison, partitions=args.partitions)
        finally:
            spark.stop()
        print(f"wrote {args.rows} rows to {out}")
        return EXIT_OK

    dsn = resolve_dsn(args.dsn)
    version = check_connection(dsn)  # fail fast, before Spark starts
    progress(f"lonnymq {version}; starting Spark (master {master})")

    if args.command == "loadgen":
        from .loadgen import LoadgenConfig, format_loadgen, run_loadgen

        cfg = LoadgenConfig(
            producers=args.producers, consumers=args.consumers, channels=args.channels,
            duration_s=args.duration, produce_batch=args.produce_batch, dequeue_batch=args.dequeue_batch,
            payload_bytes=args.payload_bytes, lock_ms=args.lock_ms, drain_timeout_s=args.drain_timeout,
            channel_prefix=args.prefix, keep_channels=args.keep_channels)
        cfg.check()
        spark = start_spark()
        try:
            result = run_loadgen(spark, dsn, cfg, progress)
        finally:
            spark.stop()
        print(format_loadgen(result))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        return EXIT_OK if result["all_completed"] else EXIT_INCOMPLETE

    spark = start_spark()
    try:
        if args.command == "enqueue":
            from .enqueue import EnqueueSpec, enqueue, read_input

            spec = EnqueueSpec(channel=args.channel, channel_col=args.channel_col, content_col=args.content_col,
                               content_json=args.content_json, dequeue_at_col=args.dequeue_at_col,
                               key_col=args.key_col, headers_col=args.headers_col, batch_size=args.batch_size)
            df = read_input(spark, args.input, args.format)
            result = enqueue(spark, df, dsn, spec, skip_bad=args.skip_bad, partitions=args.partitions,
                             fail_after_commit=True if args.fail_after_commit else None, progress=progress)
            result.spark_start_seconds = started[0]
            print(result.report())
            return result.exit_code

        from .export import export

        res = export(spark, dsn, args.out, channels=args.channels, partitions=args.partitions,
                     charts=not args.no_charts, progress=progress)
        print(res.table())
        print(f"\nParquet: {res.out / 'history'} ({res.history_rows} rows), "
              f"{res.out / 'dead_letter'} ({res.dead_letter_rows} rows); summary: {res.out / 'summary.json'}")
        for path in res.charts:
            print(f"chart: {path}")
        return EXIT_OK
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - a failed Spark job: one readable line, then the cause
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        if not isinstance(exc, (Py4JJavaError, PySparkException)):
            raise
        print(f"error: a Spark job failed: {_root_cause(str(exc))}", file=sys.stderr)
        if args.command == "enqueue":
            print("(partitions that committed stay written; running the same enqueue again is safe: "
                  "the keys make it exactly-once)", file=sys.stderr)
        return EXIT_JOB_FAILED


def _root_cause(text: str) -> str:
    """The exception line of the Python traceback in a failed job's report (the
    first unindented line after its last frame), else the report's first line."""
    lines = text.splitlines()
    frames = [i for i, ln in enumerate(lines) if ln.startswith("  File ")]
    if frames:
        for ln in lines[frames[-1] + 1:]:
            if ln.strip() and not ln.startswith((" ", "\t")):
                return ln.strip()
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    return first or "unknown error"


if __name__ == "__main__":
    sys.exit(main())
