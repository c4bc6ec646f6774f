"""Export lonnymq's history and dead letters to Parquet, with a summary and charts.

``<out>/history/``      lonnymq.message_history (completed messages of channels
                        with retain_history), one Parquet column per table column
``<out>/dead_letter/``  lonnymq.dead_letter (attempt_log as JSON text)
``<out>/summary.json``  per channel: completed, dead, attempts distribution,
                        create-to-complete latency p50 / p95 / p99 (ms, exact)
``<out>/charts/``       attempts.png, latency.png

The tables are read by the executors, in id ranges, all in one snapshot: the
driver holds a REPEATABLE READ transaction open and exports its snapshot
(``pg_export_snapshot``), which every reading task imports. So the two tables
and all ranges agree with each other even while workers keep completing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .common import APPLICATION_NAME, PipelineError, Progress, check_connection

FETCH_ROWS = 5000
ROWS_PER_PARTITION = 100_000

# The columns message_history and dead_letter share: the message as it was.
_MESSAGE_FIELDS = [
    T.StructField("id", T.LongType(), False),
    T.StructField("channel", T.StringType(), False),
    T.StructField("key", T.StringType(), True),
    T.StructField("content", T.BinaryType(), False),
    T.StructField("state", T.BinaryType(), True),
    T.StructField("num_attempts", T.IntegerType(), False),
    T.StructField("created_at", T.LongType(), False),
]

HISTORY_SCHEMA = T.StructType([
    *_MESSAGE_FIELDS,
    T.StructField("completed_at", T.LongType(), False),
])

DEAD_LETTER_SCHEMA = T.StructType([
    *_MESSAGE_FIELDS,
    T.StructField("dead_at", T.LongType(), False),
    T.StructField("last_error", T.StringType(), True),
    T.StructField("attempt_log", T.StringType(), True),  # jsonb as JSON text
])

_TABLES: dict[str, tuple[T.StructType, dict[str, str]]] = {
    "message_history": (HISTORY_SCHEMA, {}),
    "dead_letter": (DEAD_LETTER_SCHEMA, {"attempt_log": "attempt_log::text"}),
}
_OUT_DIRS = {"message_history": "history", "dead_letter": "dead_letter"}


@dataclass
class ChannelSummary:
    channel: str
    completed: int = 0
    dead: int = 0
    # attempts -> count; completed: attempts it took, dead: attempts used up
    attempts_completed: dict[int, int] = field(default_factory=dict)
    attempts_dead: dict[int, int] = field(default_factory=dict)
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None

    @property
    def attempts(self) -> dict[int, int]:
        """Both outcomes together."""
        out = dict(self.attempts_completed)
        for k, v in self.attempts_dead.items():
            out[k] = out.get(k, 0) + v
        return dict(sorted(out.items()))


@dataclass
class ExportResult:
    out: Path
    history_rows: int
    dead_letter_rows: int
    channels: list[ChannelSummary]
    charts: list[Path]
    seconds: float

    def table(self) -> str:
        return format_summary(self.channels)


# ------------------------------------------------------------------ reading


def _ranges(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """[lo, hi] cut into at most n contiguous, non-empty id ranges."""
    n = max(1, min(n, hi - lo + 1))
    step = (hi - lo + 1) / n
    bounds = [lo + round(i * step) for i in range(n)] + [hi + 1]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(n) if bounds[i] <= bounds[i + 1] - 1]


def _read_range(bounds: Iterator[tuple[int, int]], *, dsn: str, snapshot: str, table: str,
                columns: Sequence[str], channels: list[str] | None) -> Iterator[tuple[Any, ...]]:
    """Rows of lonnymq.<table> with ids in the given ranges, in the exported snapshot."""
    import psycopg
    from psycopg import sql

    exprs = _TABLES[table][1]
    select = sql.SQL(", ").join(sql.SQL(exprs.get(c, c)) for c in columns)
    where = sql.SQL("id BETWEEN %s AND %s") + (sql.SQL(" AND channel = ANY(%s)") if channels else sql.SQL(""))
    query = sql.SQL("SELECT {} FROM lonnymq.{} WHERE {} ORDER BY id").format(select, sql.Identifier(table), where)
    with psycopg.connect(dsn, autocommit=True, application_name=f"{APPLICATION_NAME} export") as conn:
        for lo, hi in bounds:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))
                params: list[Any] = [lo, hi] + ([channels] if channels else [])
                with conn.cursor(name="lonnymq_export") as cur:
                    cur.execute(query, params)
                    while batch := cur.fetchmany(FETCH_ROWS):
                        yield from batch


def _read_table(spark: SparkSession, dsn: str, snapshot: str, table: str, lo: int | None,
                hi: int | None, count: int, channels: list[str] | None, partitions: int | None) -> DataFrame:
    schema = _TABLES[table][0]
    if lo is None or hi is None:
        return spark.createDataFrame([], schema)
    n = partitions or max(1, min(spark.sparkContext.defaultParallelism * 2, -(-count // ROWS_PER_PARTITION)))
    ranges = _ranges(lo, hi, n)
    columns = schema.fieldNames()
    kw = dict(dsn=dsn, snapshot=snapshot, table=table, columns=columns, channels=channels)
    rdd = spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(lambda it: _read_range(it, **kw))
    return spark.createDataFrame(rdd, schema)


# ------------------------------------------------------------------ summary


def summarise(history: DataFrame, dead: DataFrame) -> list[ChannelSummary]:
    """Per channel: counts, attempts distributions and exact latency percentiles
    (linear interpolation between the closest ranks, like numpy's default)."""
    out: dict[str, ChannelSummary] = {}

    def get(ch: str) -> ChannelSummary:
        if ch not in out:
            out[ch] = ChannelSummary(ch)
        return out[ch]

    lat = history.groupBy("channel").agg(
        F.count(F.lit(1)).alias("n"),
        F.percentile(F.col("completed_at") - F.col("created_at"), F.array(
            F.lit(0.5), F.lit(0.95), F.lit(0.99))).alias("p"),
    )
    for r in lat.collect():
        s = get(r["channel"])
        s.completed = r["n"]
        s.latency_p50_ms, s.latency_p95_ms, s.latency_p99_ms = (float(x) for x in r["p"])
    for r in history.groupBy("channel", "num_attempts").count().collect():
        get(r["channel"]).attempts_completed[r["num_attempts"]] = r["count"]
    for r in dead.groupBy("channel", "num_attempts").count().collect():
        s = get(r["channel"])
        s.attempts_dead[r["num_attempts"]] = r["count"]
        s.dead += r["count"]
    for s in out.values():
        s.attempts_completed = dict(sorted(s.attempts_completed.items()))
        s.attempts_dead = dict(sorted(s.attempts_dead.items()))
    return [out[k] for k in sorted(out)]


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _dist(d: dict[int, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in d.items()) or "-"


def format_summary(channels: list[ChannelSummary]) -> str:
    """The summary as a fixed-width text table."""
    head = ["channel", "completed", "dead", "p50 ms", "p95 ms", "p99 ms",
            "attempts (n:count) completed", "attempts dead"]
    rows = [[s.channel, str(s.completed), str(s.dead), _ms(s.latency_p50_ms), _ms(s.latency_p95_ms),
             _ms(s.latency_p99_ms), _dist(s.attempts_completed), _dist(s.attempts_dead)] for s in channels]
    rows.append(["TOTAL", str(sum(s.completed for s in channels)), str(sum(s.dead for s in channels)),
                 "", "", "", "", ""])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    right = {1, 2, 3, 4, 5}

    def fmt(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(head), sep, *[fmt(r) for r in rows[:-1]], sep, fmt(rows[-1])])


# ------------------------------------------------------------------ driver


def export(
    spark: SparkSession,
    dsn: str,
    out: str | Path,
    *,
    channels: list[str] | None = None,
    partitions: int | None = None,
    charts: bool = True,
    progress: Progress | None = None,
) -> ExportResult:
    """Write ``out``/history, ``out``/dead_letter (Parquet, overwritten), summary.json
    and charts; return the per-channel summary. ``channels``: only these."""
    import psycopg

    progress = progress or Progress("export")
    t0 = time.monotonic()
    out = Path(out)
    check_connection(dsn, need=("lonnymq.message_history", "lonnymq.dead_letter"))
    sc = spark.sparkContext
    try:
        conn = psycopg.connect(dsn, autocommit=False, application_name=f"{APPLICATION_NAME} export")
    except psycopg.Error as exc:
        raise PipelineError(f"cannot connect to PostgreSQL: {exc}") from exc
    counts: dict[str, int] = {}
    try:
        # The snapshot stays valid while this transaction is open: until the
        # Parquet files are written.
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        snapshot = conn.execute("SELECT pg_catalog.pg_export_snapshot()").fetchone()[0]
        for table, dirname in _OUT_DIRS.items():
            cond = " WHERE channel = ANY(%s)" if channels else ""
            lo, hi, n = conn.execute(f"SELECT min(id), max(id), count(*) FROM lonnymq.{table}{cond}",
                                     [channels] if channels else []).fetchone()
            counts[table] = n
            progress(f"{table}: {n} rows")
            df = _read_table(spark, dsn, snapshot, table, lo, hi, n, channels, partitions)
            with progress.spark_job(sc, f"{table} -> {out / dirname}"):
                df.write.mode("overwrite").parquet(str(out / dirname))
    finally:
        conn.rollback()
        conn.close()

    history = spark.read.parquet(str(out / "history"))
    dead = spark.read.parquet(str(out / "dead_letter"))
    with progress.spark_job(sc, "summary"):
        summary = summarise(history, dead)
    (out / "summary.json").write_text(json.dumps(
        {"history_rows": counts["message_history"], "dead_letter_rows": counts["dead_letter"],
         "channels": [asdict(s) for s in summary]}, indent=2) + "\n")
    chart_paths: list[Path] = []
    if charts:
        from .charts import draw_charts

        chart_paths = draw_charts(summary, out / "charts")
        progress(f"charts: {', '.join(str(p) for p in chart_paths)}")
    seconds = time.monotonic() - t0
    progress(f"done in {seconds:.1f}s")
    return ExportResult(out, counts["message_history"], counts["dead_letter"], summary, chart_paths, seconds)
