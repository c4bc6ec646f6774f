"""Export lonnymq's history and dead letters to Parquet, with a summary and charts.

``<out>/history/``      lonnymq.message_history (completed messages of channels
                        with retain_history), one Parquet column per table column
                        (each nullable, as Spark's JDBC source reads them;
                        headers as JSON text)
``<out>/dead_letter/``  lonnymq.dead_letter (headers and attempt_log as JSON text)
``<out>/summary.json``  per channel: completed, dead, attempts distribution,
                        create-to-complete latency p50 / p95 / p99 (ms, exact)
``<out>/charts/``       attempts.png, latency.png

The tables are read by the executors, in id ranges, all in one snapshot: the
driver holds a REPEATABLE READ transaction open and exports its snapshot
(``pg_export_snapshot``), which every reading task imports. So the two tables
and all ranges agree with each other even while workers keep completing.

The executors read through Spark's JDBC source (the PostgreSQL JDBC driver,
``jdbc_jar``): rows go from the socket to Parquet inside the JVM, two to three
times as fast as rows through Python. JDBC cannot open a Unix-domain socket, so a
connection over one (a local server, local mode) is read by psycopg in the
Python workers instead, in the same snapshot.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .common import APPLICATION_NAME, PipelineError, Progress, check_connection, resolve_dsn

if TYPE_CHECKING:  # pragma: no cover
    from psycopg.connection import ConnectionInfo

FETCH_ROWS = 5000  # rows per round trip, for both readers
ROWS_PER_PARTITION = 100_000

JDBC_JAR_ENV = "LONNYMQ_JDBC_JAR"
DEFAULT_JDBC_JAR = Path("/usr/share/java/postgresql.jar")  # Debian's libpostgresql-jdbc-java
JDBC_DRIVER_CLASS = "org.postgresql.Driver"
# libpq connection parameters -> the PostgreSQL JDBC driver's properties of the
# same meaning. Host, port, database and user come from the driver's live
# connection instead (the server that holds the snapshot).
_JDBC_PROPERTIES = {
    "password": "password",
    "sslmode": "sslmode",
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "sslpassword": "sslpassword",
    "connect_timeout": "connectTimeout",
    "options": "options",
}

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

# The tables' columns in their order: headers (0.16.0) last in both.
HISTORY_SCHEMA = T.StructType([
    *_MESSAGE_FIELDS,
    T.StructField("completed_at", T.LongType(), False),
    T.StructField("headers", T.StringType(), True),  # jsonb as JSON text
])

DEAD_LETTER_SCHEMA = T.StructType([
    *_MESSAGE_FIELDS,
    T.StructField("dead_at", T.LongType(), False),
    T.StructField("last_error", T.StringType(), True),
    T.StructField("attempt_log", T.StringType(), True),  # jsonb as JSON text
    T.StructField("headers", T.StringType(), True),  # jsonb as JSON text
])


def _all_nullable(schema: T.StructType) -> T.StructType:
    return T.StructType([T.StructField(f.name, f.dataType, True) for f in schema.fields])


# table -> (the schema of its Parquet files, SQL expressions of the columns that
# are not read as they are: jsonb as its text, for both readers). Every column
# nullable in the files, whichever reader wrote them: Spark's JDBC source
# declares any query's columns nullable.
_TABLES: dict[str, tuple[T.StructType, dict[str, str]]] = {
    "message_history": (_all_nullable(HISTORY_SCHEMA), {"headers": "headers::text AS headers"}),
    "dead_letter": (_all_nullable(DEAD_LETTER_SCHEMA), {"attempt_log": "attempt_log::text AS attempt_log",
                                                        "headers": "headers::text AS headers"}),
}
# (The headers columns came with 0.16.0.)
_EXPORT_NEEDS = ("lonnymq.message_history.headers", "lonnymq.dead_letter.headers")
_EXPORT_SINCE = "0.16.0"
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


def jdbc_jar() -> Path:
    """The PostgreSQL JDBC driver's jar: $LONNYMQ_JDBC_JAR, else Debian's
    (package libpostgresql-jdbc-java). PipelineError when it is not there."""
    path = Path(os.environ.get(JDBC_JAR_ENV) or DEFAULT_JDBC_JAR)
    if not path.is_file():
        raise PipelineError(
            f"the PostgreSQL JDBC driver is needed to export over TCP, and {path} is not a file: install "
            f"it (Debian: apt-get install libpostgresql-jdbc-java), or set {JDBC_JAR_ENV} to its jar")
    return path


def jars_with_jdbc_driver(jars: str | None) -> str | None:
    """A spark.jars value with ``jdbc_jar()`` added, when it is there (get_spark
    ships it so: on the driver's class path from the start, and to every executor)."""
    try:
        jar = str(jdbc_jar())
    except PipelineError:
        return jars  # export says so if it needs it; the other commands do not
    listed = [j for j in (jars or "").split(",") if j]
    return ",".join(listed if jar in listed else [*listed, jar])


def ensure_jdbc_driver(spark: SparkSession) -> bool:
    """Make the JDBC driver loadable by this thread's Spark reads and by the
    executors. Nothing to do in a session that has it (get_spark puts it in
    spark.jars; spark-submit --jars). Else ``ADD JAR`` of ``jdbc_jar()``, and
    True: that ships it to the executors but loads it for the calling thread
    only, and the driver cannot decode the exceptions that failed tasks report
    (they read "UnknownReason")."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader().loadClass(JDBC_DRIVER_CLASS)
        return False
    except Exception:  # noqa: BLE001 - py4j's Py4JJavaError: ClassNotFoundException
        pass
    jar = str(jdbc_jar()).replace("\\", "\\\\").replace("'", "\\'")
    spark.sql(f"ADD JAR '{jar}'")
    return True


def jdbc_options(info: ConnectionInfo, dsn: str) -> dict[str, str] | None:
    """Spark JDBC options that connect to the server, database and user of the
    driver's connection ``info`` (resolved from ``dsn``), with the DSN's password,
    TLS and options; None when that connection is over a Unix-domain socket."""
    from psycopg.conninfo import conninfo_to_dict

    host = info.host
    if host.startswith(("/", "@")):
        return None
    params = conninfo_to_dict(resolve_dsn(dsn))  # with PGPASSWORD & co., as libpq would
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    options = {
        "url": f"jdbc:postgresql://{host}:{info.port}/{quote(info.dbname, safe='')}",
        "driver": JDBC_DRIVER_CLASS,
        "user": info.user,
        "ApplicationName": f"{APPLICATION_NAME} export",
    }
    options.update({prop: str(params[key]) for key, prop in _JDBC_PROPERTIES.items() if params.get(key)})
    return options


def _ranges(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """[lo, hi] cut into at most n contiguous, non-empty id ranges."""
    n = max(1, min(n, hi - lo + 1))
    step = (hi - lo + 1) / n
    bounds = [lo + round(i * step) for i in range(n)] + [hi + 1]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(n) if bounds[i] <= bounds[i + 1] - 1]


def _select_list(table: str) -> str:
    exprs = _TABLES[table][1]
    return ", ".join(exprs.get(c, c) for c in _TABLES[table][0].fieldNames())


def _read_range(bounds: Iterator[tuple[int, int]], *, dsn: str, snapshot: str, table: str,
                channels: list[str] | None) -> Iterator[tuple[Any, ...]]:
    """Rows of lonnymq.<table> with ids in the given ranges, in the exported snapshot
    (the Python reader: connections over a Unix-domain socket)."""
    import psycopg
    from psycopg import sql

    where = sql.SQL("id BETWEEN %s AND %s") + (sql.SQL(" AND channel = ANY(%s)") if channels else sql.SQL(""))
    query = sql.SQL("SELECT {} FROM lonnymq.{} WHERE {} ORDER BY id").format(
        sql.SQL(_select_list(table)), sql.Identifier(table), where)
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


@dataclass(frozen=True)
class _Source:
    """Where and in which snapshot the executors read."""

    dsn: str
    snapshot: str
    jdbc: dict[str, str] | None  # jdbc_options; None: the Python reader


def default_partitions(spark: SparkSession, lo: int, hi: int) -> int:
    """Read partitions for ids lo..hi: one per ROWS_PER_PARTITION ids (ids are
    unique: at most that many rows each), at most two per task slot."""
    return max(1, min(spark.sparkContext.defaultParallelism * 2, -(-(hi - lo + 1) // ROWS_PER_PARTITION)))


def _read_table(spark: SparkSession, source: _Source, table: str, lo: int, hi: int, n: int,
                channels: list[str] | None) -> DataFrame:
    """lonnymq.<table>, ids lo..hi, in n partitions, in the exported snapshot."""
    if source.jdbc is not None:
        return _read_table_jdbc(spark, source, table, lo, hi, n, channels)
    ranges = _ranges(lo, hi, n)
    kw = dict(dsn=source.dsn, snapshot=source.snapshot, table=table, channels=channels)
    rdd = spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(lambda it: _read_range(it, **kw))
    return spark.createDataFrame(rdd, _TABLES[table][0])


def _read_table_jdbc(spark: SparkSession, source: _Source, table: str, lo: int, hi: int, n: int,
                     channels: list[str] | None) -> DataFrame:
    """lonnymq.<table> through Spark's JDBC source, in n id ranges (Spark's stride
    partitioning of [lo, hi]), every task in the exported snapshot."""
    from psycopg import sql

    where = f" WHERE channel = ANY({sql.Literal(channels).as_string()})" if channels else ""
    # The first statement of each task's connection, which Spark has put out of
    # autocommit (it does when fetchsize > 0: PostgreSQL streams rows only inside
    # a transaction), so it runs in the transaction that the read runs in. The
    # SAVEPOINT fails outside a transaction block: in autocommit mode the import
    # would end with this statement and the read would see a newer snapshot
    # without a word.
    import_snapshot = (
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY; "
        f"SET TRANSACTION SNAPSHOT {sql.Literal(source.snapshot).as_string()}; "
        "SAVEPOINT lonnymq_export_snapshot")
    return (spark.read.format("jdbc")
            .options(**source.jdbc)
            .option("dbtable", f"(SELECT {_select_list(table)} FROM lonnymq.{table}{where}) AS {table}")
            .option("partitionColumn", "id")
            .option("lowerBound", str(lo))
            .option("upperBound", str(hi + 1))
            .option("numPartitions", str(n))
            .option("fetchsize", str(FETCH_ROWS))
            .option("sessionInitStatement", import_snapshot)
            # A server-side prepared statement from the first execution, so that
            # bytea and integers come in binary, not as text to decode: about
            # 15 % less CPU in the JVM.
            .option("prepareThreshold", "-1")
            .load())


# ------------------------------------------------------------------ summary


def summarise(history: DataFrame, dead: DataFrame) -> list[ChannelSummary]:
    """Per channel: counts, attempts distributions and exact latency percentiles
    (linear interpolation between the closest ranks, like numpy's default), from
    one Spark query over both tables."""
    outcomes = history.select(
        "channel", "num_attempts", (F.col("completed_at") - F.col("created_at")).alias("latency"),
        F.lit(True).alias("completed"),
    ).unionByName(dead.select(
        "channel", "num_attempts", F.lit(None).cast("long").alias("latency"), F.lit(False).alias("completed")))
    # Messages per distinct (channel, outcome, attempts, latency) first: a cheap
    # hash aggregation that leaves few rows, which the percentiles weigh by count.
    counted = outcomes.groupBy("channel", "completed", "num_attempts", "latency").agg(F.count(F.lit(1)).alias("n"))
    # Rolled up to (channel, outcome, attempts) for the attempts distributions and
    # to (channel, outcome) for the totals and the latency percentiles (computed
    # at that level only); the coarser levels of the rollup are not used.
    channel_level = (F.grouping("completed") == 0) & (F.grouping("num_attempts") == 1)
    rolled = counted.rollup("channel", "completed", "num_attempts").agg(
        F.sum("n").alias("n"),
        F.percentile(F.when(channel_level, F.col("latency")), [0.5, 0.95, 0.99], F.col("n")).alias("p"),
        F.grouping("completed").alias("all_outcomes"),
        F.grouping("num_attempts").alias("all_attempts"),
    ).where(F.col("all_outcomes") == 0)
    spark = history.sparkSession
    with _shuffle_partitions(spark, spark.sparkContext.defaultParallelism):
        rows = rolled.collect()

    out: dict[str, ChannelSummary] = {}
    for r in sorted(rows, key=lambda r: (r["channel"], r["num_attempts"] or 0)):
        s = out.setdefault(r["channel"], ChannelSummary(r["channel"]))
        if not r["all_attempts"]:
            (s.attempts_completed if r["completed"] else s.attempts_dead)[r["num_attempts"]] = r["n"]
        elif not r["completed"]:
            s.dead = r["n"]
        else:
            s.completed = r["n"]
            s.latency_p50_ms, s.latency_p95_ms, s.latency_p99_ms = (float(x) for x in r["p"])
    return [out[k] for k in sorted(out)]


@contextmanager
def _shuffle_partitions(spark: SparkSession, n: int) -> Iterator[None]:
    """spark.sql.shuffle.partitions at most n in the block: the summary's shuffles
    carry little, and Spark's default of 200 partitions costs a quarter of the
    summary's time on 1M rows."""
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    if before is None or int(before) <= n:
        yield
        return
    spark.conf.set(key, str(n))
    try:
        yield
    finally:
        spark.conf.set(key, before)


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


def export_tables(
    spark: SparkSession,
    dsn: str,
    out: str | Path,
    *,
    channels: list[str] | None = None,
    partitions: int | None = None,
    progress: Progress | None = None,
) -> None:
    """The Parquet part of ``export``: ``out``/history and ``out``/dead_letter
    (overwritten), both read in one snapshot. ``channels``: only these."""
    import psycopg

    progress = progress or Progress("export")
    out = Path(out)
    check_connection(dsn, need=_EXPORT_NEEDS, since=_EXPORT_SINCE)
    try:
        conn = psycopg.connect(dsn, application_name=f"{APPLICATION_NAME} export")
    except psycopg.Error as exc:
        raise PipelineError(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        jdbc = jdbc_options(conn.info, dsn)
        if jdbc is None:
            progress("connected over a Unix-domain socket, which JDBC cannot open: "
                     "the tables are read through Python (two to three times slower than JDBC over TCP)")
        elif ensure_jdbc_driver(spark):
            progress(f"added the JDBC driver to a running Spark session: start it with spark.jars={jdbc_jar()} "
                     "(get_spark does) for readable errors from failed tasks")
        # The snapshot stays valid while this transaction is open: until the
        # Parquet files are written.
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        source = _Source(dsn, conn.execute("SELECT pg_catalog.pg_export_snapshot()").fetchone()[0], jdbc)
        writes: list[tuple[DataFrame, Path]] = []
        for table, dirname in _OUT_DIRS.items():
            # min and max come from the primary key's index; counting the rows
            # would scan the table once more.
            cond = " WHERE channel = ANY(%s)" if channels else ""
            lo, hi = conn.execute(f"SELECT min(id), max(id) FROM lonnymq.{table}{cond}",
                                  [channels] if channels else []).fetchone()
            if lo is None:
                progress(f"{table}: empty")
                df = spark.createDataFrame(spark.sparkContext.emptyRDD(), _TABLES[table][0])
            else:
                n = partitions or default_partitions(spark, lo, hi)
                progress(f"{table}: ids {lo} to {hi}, {n} partition(s)")
                df = _read_table(spark, source, table, lo, hi, n, channels)
            writes.append((df, out / dirname))

        def write(df: DataFrame, path: Path) -> None:
            with progress.spark_job(spark.sparkContext, f"{path.name} -> {path}"):
                df.write.mode("overwrite").parquet(str(path))

        # Both tables at once: the dead letters (few, as a rule) then cost
        # little more than the tasks that read them, not a Spark job's set-up
        # and commit after the history's.
        with ThreadPoolExecutor(max_workers=len(writes), thread_name_prefix="lonnymq-export") as pool:
            for job in [pool.submit(write, df, path) for df, path in writes]:
                job.result()
    finally:
        conn.rollback()
        conn.close()


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
    progress = progress or Progress("export")
    t0 = time.monotonic()
    out = Path(out)
    export_tables(spark, dsn, out, channels=channels, partitions=partitions, progress=progress)

    # The summary describes the Parquet files as written.
    history = spark.read.schema(HISTORY_SCHEMA).parquet(str(out / "history"))
    dead = spark.read.schema(DEAD_LETTER_SCHEMA).parquet(str(out / "dead_letter"))
    with progress.spark_job(spark.sparkContext, "summary"):
        summary = summarise(history, dead)
    history_rows = sum(s.completed for s in summary)
    dead_letter_rows = sum(s.dead for s in summary)
    progress(f"{history_rows} completed message(s), {dead_letter_rows} dead letter(s)")
    (out / "summary.json").write_text(json.dumps(
        {"history_rows": history_rows, "dead_letter_rows": dead_letter_rows,
         "channels": [asdict(s) for s in summary]}, indent=2) + "\n")
    chart_paths: list[Path] = []
    if charts:
        from .charts import draw_charts

        chart_paths = draw_charts(summary, out / "charts")
        progress(f"charts: {', '.join(str(p) for p in chart_paths)}")
    seconds = time.monotonic() - t0
    progress(f"done in {seconds:.1f}s")
    return ExportResult(out, history_rows, dead_letter_rows, summary, chart_paths, seconds)
