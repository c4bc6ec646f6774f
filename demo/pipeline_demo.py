"""The Spark part of the demo: enqueue a dataset through Spark, process it, export.

    from pipeline_demo import run_pipeline_demo
    run_pipeline_demo(dsn, workdir)

What it does, against the database ``dsn`` (lonnymq 0.2.0 or later installed):
  1. sets up the channels lake-orders, lake-emails and lake-webhooks with a retry policy
     (3 attempts, short backoff), retained history, and a one-hour dedup
     window (so that the keys also cover messages already completed);
  2. writes a generated dataset of events (pipeline/sample.py) as Parquet and
     enqueues it through Spark (local[2,4]), keyed by event_id;
  3. runs worker threads: each message fails as often as its fail_times says
     (message_fail: 'retry' with backoff, then 'dead' after 3 attempts for
     the two poison events), else it is completed;
  4. runs the same enqueue again: every key is known, nothing new is created;
  5. exports history and dead letters to Parquet, prints the summary table and
     the paths of the charts.

Every claim is checked; a mismatch raises RuntimeError.
Run alone: ``.venv/bin/python demo/pipeline_demo.py`` (starts its own throwaway cluster).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import psycopg
from pyspark.sql import functions as F

from pipeline import EnqueueSpec, enqueue, export, get_spark, read_input, write_sample

from lonnymq_dev.calls import dequeue, complete

# The dataset's channels orders / emails / webhooks, prefixed so as not to meet
# the channels of demo/demo.py when both run in one database.
PREFIX = "lake-"
CHANNELS = tuple(PREFIX + c for c in ("orders", "emails", "webhooks"))
ROWS = 300
POISON = 2
MAX_ATTEMPTS = 3
WORKERS = 3
LOCK_MS = 5000
DEADLINE_S = 60


def _say(text: str) -> None:
    print(text, flush=True)


def _check(ok: bool, claim: str) -> None:
    if not ok:
        raise RuntimeError(f"pipeline demo: {claim}: NOT TRUE")
    _say(f"  ok: {claim}")


def _setup_channels(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for ch in CHANNELS:
            conn.execute(
                "SELECT lonnymq.channel_set(%s, p_max_attempts => %s, p_backoff_base_ms => 100,"
                " p_backoff_max_ms => 400, p_dedup_window_ms => 3600000, p_retain_history => true)",
                (ch, MAX_ATTEMPTS))


def _outstanding(conn: psycopg.Connection) -> int:
    return conn.execute(
        "SELECT coalesce(sum(ready + scheduled + locked), 0) FROM lonnymq.channel_stats WHERE channel = ANY(%s)",
        (list(CHANNELS),)).fetchone()[0]


def _work(dsn: str, n: int, stop: threading.Event, counts: dict[str, int], lock: threading.Lock) -> None:
    """dequeue (from the demo's channels only, in turn) -> fail while the event
    says so, else complete."""
    turn = n
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            channel = CHANNELS[turn % len(CHANNELS)]
            turn += 1
            rows = dequeue(conn, LOCK_MS, limit=10, channel=channel, columns="id, num_attempts, content")
            if not rows:
                time.sleep(0.01)
                continue
            for mid, attempt, content in rows:
                event = json.loads(content)
                if attempt <= event["fail_times"]:
                    outcome = conn.execute("SELECT lonnymq.message_fail(%s, %s, %s)",
                                           (mid, attempt, f"simulated failure on attempt {attempt}")).fetchone()[0]
                else:
                    time.sleep(0.002)  # the "work"
                    done = complete(conn, mid, attempt)
                    outcome = "completed" if done else "stale"
                with lock:
                    counts[str(outcome)] = counts.get(str(outcome), 0) + 1


def run_pipeline_demo(dsn: str, workdir: Path) -> None:
    """Enqueue a generated dataset through Spark, process it with retries and dead
    letters, and export the history with a summary and charts into ``workdir``."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    _say("\n== Spark pipeline: enqueue a dataset, process it, export the history")
    _setup_channels(dsn)
    _say(f"channels {', '.join(CHANNELS)}: max_attempts {MAX_ATTEMPTS}, backoff 100-400 ms, "
         "history retained, dedup window 1 h")

    spark = get_spark("local[2,4]", conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"})
    try:
        data = write_sample(spark, workdir / "events.parquet", ROWS, poison=POISON, partitions=4)
        df = read_input(spark, data).withColumn("channel", F.concat(F.lit(PREFIX), F.col("channel")))
        expected_fail = {r["fail_times"]: r["count"] for r in df.groupBy("fail_times").count().collect()}
        _say(f"dataset: {data} ({ROWS} events; fail_times -> rows: {dict(sorted(expected_fail.items()))})")

        spec = EnqueueSpec(channel_col="channel", key_col="event_id")
        first = enqueue(spark, df, dsn, spec)
        _say(first.report())
        _check(first.exit_code == 0 and first.messages == ROWS, f"{ROWS} messages enqueued")

        _say(f"\n{WORKERS} workers: fail while attempt <= fail_times, else complete")
        stop = threading.Event()
        counts: dict[str, int] = {}
        lock = threading.Lock()
        threads = [threading.Thread(target=_work, args=(dsn, n, stop, counts, lock), daemon=True)
                   for n in range(WORKERS)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        with psycopg.connect(dsn, autocommit=True) as conn:
            while _outstanding(conn) and time.monotonic() - t0 < DEADLINE_S:
                time.sleep(0.1)
            left = _outstanding(conn)
        stop.set()
        for t in threads:
            t.join(timeout=10)
        _say(f"processed in {time.monotonic() - t0:.1f}s: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        _check(left == 0, "every message was completed or dead-lettered")
        _check(counts.get("dead", 0) == POISON, f"{POISON} poison events ended as dead letters")

        again = enqueue(spark, df, dsn, spec)
        with psycopg.connect(dsn, autocommit=True) as conn:
            left = _outstanding(conn)
        _say(f"\nthe same enqueue again: {again.messages} ids returned, {left} messages waiting")
        _check(again.exit_code == 0 and left == 0, "re-running the enqueue created nothing (keys, dedup window)")

        result = export(spark, dsn, workdir / "export", channels=list(CHANNELS))
        _say("\n" + result.table())
        _check(result.history_rows + result.dead_letter_rows == ROWS,
               f"history ({result.history_rows}) + dead letters ({result.dead_letter_rows}) = {ROWS} events")
        retried = sum(n for s in result.channels for a, n in s.attempts_completed.items() if a > 1)
        needed = sum(n for k, n in expected_fail.items() if 0 < k < MAX_ATTEMPTS)
        _check(retried == needed, f"{needed} events completed after a retry")
        _say(f"Parquet: {result.out / 'history'}, {result.out / 'dead_letter'}")
        for path in result.charts:
            _say(f"chart: {path}")
    finally:
        spark.stop()


if __name__ == "__main__":
    import tempfile

    from lonnymq_dev.pgcluster import Cluster

    out = Path(tempfile.mkdtemp(prefix="lonnymq-pipeline-demo-"))  # kept: the charts are there
    with Cluster() as cluster:
        cluster.create_database("demo")
        run_pipeline_demo(cluster.dsn("demo"), out)
    print(f"\noutput kept in {out}")
