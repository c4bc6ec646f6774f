"""Distributed load generation: producers and consumers as Spark tasks.

Each producer and each consumer is one Spark task with its own connection, so
the client count is not limited by one Python process (or one machine, on a
cluster). The tasks run as one *barrier* stage: Spark starts them all at once
(or refuses when it lacks the slots), and they begin together.

    run     producers create messages (``message_create``, or
            ``message_create_batch`` with a batch size) round-robin on K
            channels of their own; consumers dequeue from those channels
            (``message_dequeue`` with ``p_channel``, in turn) and complete what
            they get (``message_complete`` / ``message_complete_batch``).
    drain   after ``duration_s`` the producers stop; the consumers go on until
            every message created has been completed (they compare totals with
            ``allGather`` between rounds), or ``drain_timeout_s`` has passed.

Every task counts its messages per second of run; the driver adds them up
into messages/s for each second. Consumers touch only the run's own channels
(``<prefix>-<run id>-<n>``), dropped at the end unless ``keep_channels``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import SparkSession

from .common import APPLICATION_NAME, PipelineError, Progress, check_connection

IDLE_SLEEP_S = 0.002  # a consumer's pause after a full round of channels found nothing


@dataclass(frozen=True)
class LoadgenConfig:
    producers: int = 1
    consumers: int = 1
    channels: int = 1
    duration_s: float = 10.0
    produce_batch: int = 1  # messages per create call (>1: message_create_batch)
    dequeue_batch: int = 1  # p_limit of message_dequeue (>1: message_complete_batch)
    payload_bytes: int = 64
    lock_ms: int = 30_000
    drain_timeout_s: float = 60.0
    channel_prefix: str = "loadgen"
    keep_channels: bool = False

    def check(self) -> None:
        if self.producers < 1 or self.consumers < 1:
            raise PipelineError("need at least one producer and one consumer")
        if self.channels < 1:
            raise PipelineError("need at least one channel")
        if self.duration_s <= 0:
            raise PipelineError("duration must be positive")
        if not 1 <= self.produce_batch <= 10_000 or not 1 <= self.dequeue_batch <= 1000:
            raise PipelineError("produce batch must be 1..10000, dequeue batch 1..1000")
        if self.payload_bytes < 0 or self.lock_ms < 1:
            raise PipelineError("payload bytes must be >= 0 and lock ms >= 1")


def _client_task(index: int, _items: Iterator[Any], *, cfg: LoadgenConfig, dsn: str,
                 channels: list[str]) -> Iterator[str]:
    """One producer (index < producers) or one consumer, run as a barrier task."""
    import psycopg
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    producer = index < cfg.producers
    role = "producer" if producer else "consumer"
    k = len(channels)
    payload = b"x" * cfg.payload_bytes
    per_second: dict[int, int] = {}
    done = 0  # created (producer) or completed (consumer)
    turn = index  # next channel, staggered between tasks
    rounds = 0

    with psycopg.connect(dsn, autocommit=True, application_name=f"{APPLICATION_NAME} loadgen {role}") as conn:
        ctx.barrier()  # every client is connected: start together
        start = time.monotonic()
        end = start + cfg.duration_s

        def count(n: int) -> None:
            nonlocal done
            if n:
                done += n
                sec = int(time.monotonic() - start)
                per_second[sec] = per_second.get(sec, 0) + n

        def produce_once() -> None:
            nonlocal turn
            channel = channels[turn % k]
            turn += 1
            if cfg.produce_batch == 1:
                mid = conn.execute("SELECT lonnymq.message_create(%s, %s)", (channel, payload)).fetchone()[0]
                count(0 if mid is None else 1)
            else:
                rows = conn.execute("SELECT * FROM lonnymq.message_create_batch(%s, %s::bytea[])",
                                    (channel, [payload] * cfg.produce_batch)).fetchall()
                count(sum(1 for r in rows if r[0] is not None))

        def consume_once() -> int:
            """One dequeue on the next channel and the completes; how many completed."""
            nonlocal turn
            channel = channels[turn % k]
            turn += 1
            rows = conn.execute(
                "SELECT id, num_attempts FROM lonnymq.message_dequeue(%s, %s, %s)",
                (cfg.lock_ms, cfg.dequeue_batch, channel)).fetchall()
            if not rows:
                return 0
            if len(rows) == 1:
                ok = conn.execute("SELECT lonnymq.message_complete(%s, %s)", rows[0]).fetchone()[0]
                n = 1 if ok else 0
            else:
                n = conn.execute("SELECT lonnymq.message_complete_batch(%s, %s)",
                                 ([r[0] for r in rows], [r[1] for r in rows])).fetchone()[0]
            count(n)
            return len(rows)

        def drain() -> None:
            """Consume until a full round of the channels finds nothing."""
            empty = 0
            while empty < k:
                empty = 0 if consume_once() else empty + 1

        if producer:
            while time.monotonic() < end:
                produce_once()
        else:
            empty = 0
            while time.monotonic() < end:
                if consume_once():
                    empty = 0
                else:
                    empty += 1
                    if empty >= k:
                        time.sleep(IDLE_SLEEP_S)
                        empty = 0
        run_done = done

        # Drain rounds: every task learns the totals from allGather and so all
        # take the same decision (a local clock alone could split them).
        drain_deadline = time.monotonic() + cfg.drain_timeout_s
        while True:
            info = [json.loads(m) for m in ctx.allGather(json.dumps(
                {"role": role, "done": done, "late": time.monotonic() > drain_deadline}))]
            rounds += 1
            created = sum(m["done"] for m in info if m["role"] == "producer")
            completed = sum(m["done"] for m in info if m["role"] == "consumer")
            if completed >= created or any(m["late"] for m in info):
                break
            if not producer:
                before = done
                drain()
                if done == before:
                    time.sleep(0.05)  # nothing this round: someone else's lock, or nothing left
        drain_s = time.monotonic() - end
    yield json.dumps({"index": index, "role": role, "total": done, "during_run": run_done,
                      "per_second": per_second, "drain_rounds": rounds, "drain_s": drain_s})


def run_loadgen(spark: SparkSession, dsn: str, config: LoadgenConfig,
                progress: Progress | None = None) -> dict[str, Any]:
    """Run producers and consumers as Spark tasks; return the result dict:

    created, completed, completed_during_run, all_completed (every message the
    producers created was completed, and none of the run's channels holds a
    message), remaining, produce_rate / complete_rate (messages/s over the run),
    drain_s, per_second (list of {second, phase, produced, completed}), channels,
    tasks, config.
    """
    config.check()
    progress = progress or Progress("loadgen")
    # (Its creates give channel and contents only: either signature serves.)
    check_connection(dsn, need=(("lonnymq.message_create_batch(text,bytea[],bigint[],text[],jsonb[],bigint[],text)",
                                 "lonnymq.message_create_batch(text,bytea[],bigint[],text[])"),
                                "lonnymq.message_complete_batch(bigint[],integer[])"))
    sc = spark.sparkContext
    n = config.producers + config.consumers
    slots = sc.defaultParallelism
    if n > slots:
        raise PipelineError(f"{n} clients need {n} concurrent Spark tasks, the master offers {slots}: "
                            f"use --master 'local[{n}]' or more executor cores")
    run_id = uuid.uuid4().hex[:8]
    channels = [f"{config.channel_prefix}-{run_id}-{i}" for i in range(config.channels)]
    progress(f"{config.producers} producer(s), {config.consumers} consumer(s), {config.channels} channel(s) "
             f"({channels[0]} ...), {config.duration_s:g}s")

    stop = threading.Event()
    t_submit = time.monotonic()

    def ticker() -> None:
        """Every second: the backlog of the run's channels, as the database sees it
        (the tasks report their own counts only at the end)."""
        import psycopg

        try:
            conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error:
            conn = None
        try:
            while not stop.wait(1.0):
                line = f"{time.monotonic() - t_submit:.0f}s since submission"
                if conn is not None:
                    try:
                        line += f", {_backlog(conn, channels)} messages waiting in the run's channels"
                    except psycopg.Error:
                        conn.close()
                        conn = None
                progress(line)
        finally:
            if conn is not None:
                conn.close()

    tick = threading.Thread(target=ticker, name="loadgen-ticker", daemon=True)
    tick.start()
    try:
        kw = dict(cfg=config, dsn=dsn, channels=channels)
        with progress.spark_job(sc, "clients", interval=5.0):
            raw = (sc.parallelize(range(n), n).barrier()
                   .mapPartitionsWithIndex(lambda i, it: _client_task(i, it, **kw)).collect())
    finally:
        stop.set()
        tick.join(timeout=5)
    tasks = [json.loads(r) for r in raw]

    seconds = max([int(s) for t in tasks for s in t["per_second"]] + [int(config.duration_s) - 1])
    per_second = []
    for s in range(seconds + 1):
        row = {"second": s, "phase": "run" if s < config.duration_s else "drain", "produced": 0, "completed": 0}
        for t in tasks:
            row["produced" if t["role"] == "producer" else "completed"] += t["per_second"].get(str(s), 0)
        per_second.append(row)
    created = sum(t["total"] for t in tasks if t["role"] == "producer")
    completed = sum(t["total"] for t in tasks if t["role"] == "consumer")
    during = sum(t["during_run"] for t in tasks if t["role"] == "consumer")
    remaining = _remaining(dsn, channels)
    if not config.keep_channels:
        _drop_channels(dsn, channels)
    result = {
        "config": asdict(config),
        "channels": channels,
        "created": created,
        "completed": completed,
        "completed_during_run": during,
        "remaining": remaining,
        "all_completed": completed == created and remaining in (0, None),
        "produce_rate": created / config.duration_s,
        "complete_rate": during / config.duration_s,
        "drain_s": max((t["drain_s"] for t in tasks), default=0.0),
        "per_second": per_second,
        "tasks": tasks,
    }
    progress(f"created {created}, completed {completed}"
             + ("" if result["all_completed"] else f" (NOT all: {remaining} left in the channels)"))
    return result


# By name: a channel without configuration has no row in lonnymq.channel (0.11.0).
_BACKLOG_SQL = "SELECT count(*) FROM lonnymq.message AS m WHERE m.channel = ANY(%s)"


def _backlog(conn: Any, channels: list[str]) -> int:
    return conn.execute(_BACKLOG_SQL, (channels,)).fetchone()[0]


def _remaining(dsn: str, channels: list[str]) -> int | None:
    """Messages still held by the run's channels (None: could not be read, e.g.
    a role without SELECT on lonnymq's tables)."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return _backlog(conn, channels)
    except psycopg.Error:
        return None


def _drop_channels(dsn: str, channels: list[str]) -> None:
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for ch in channels:
                try:
                    conn.execute("SELECT lonnymq.channel_drop(%s)", (ch,))
                except psycopg.Error:
                    pass  # not empty, or no privilege: left in place
    except psycopg.Error:
        pass


def format_loadgen(result: dict[str, Any]) -> str:
    """The per-second table and the totals."""
    lines = [f"{'second':>6}  {'phase':<5}  {'produced/s':>10}  {'completed/s':>11}"]
    for r in result["per_second"]:
        lines.append(f"{r['second']:>6}  {r['phase']:<5}  {r['produced']:>10}  {r['completed']:>11}")
    lines += [
        f"created {result['created']}, completed {result['completed']} "
        f"({result['completed_during_run']} during the run, the rest in {result['drain_s']:.1f}s of drain)",
        f"rates over the run: {result['produce_rate']:.0f} produced/s, {result['complete_rate']:.0f} completed/s",
        "every created message completed: " + ("yes" if result["all_completed"] else "NO"),
    ]
    return "\n".join(lines)
