"""Bulk enqueue from Spark: rows -> lonnymq messages, exactly once.

How a row becomes a message
    channel     a fixed name (``channel``) or a column (``channel_col``, cast to text)
    content     ``content_col``: a binary column as is, a string column as its UTF-8
                text (or as a JSON string with ``content_json``), any other column as
                JSON; without ``content_col``: the whole row except the channel column,
                as a JSON object. Timestamps are written in ISO 8601 (UTC), dates in
                ISO 8601, binary values inside JSON in base64, decimals as numbers
                (as strings when a double cannot hold them exactly).
    dequeue_at  optional ``dequeue_at_col``: epoch milliseconds (an integer column)
                or a timestamp / date column; NULL means "now".
    key         ``key_col`` (cast to text) or, without it, derived from the row:
                ``sha256:`` + the SHA-256 of the row's canonical JSON (all input
                columns, sorted keys). Identical rows therefore make one message;
                give a key column when identical rows are distinct messages.

How it is written
    1. A validation job reads every row and reports the bad ones (NULL channel or
       content, a value JSON cannot hold such as NaN, a channel name or key of the
       wrong length, content over 16 MiB), with their count and a sample. With bad
       rows and without ``skip_bad`` nothing is written.
    2. A write job: each partition opens one connection and one transaction, sends
       its rows with ``lonnymq.message_create_batch`` in chunks of ``batch_size``
       per channel, and commits once. A partition is written entirely or not at all.

Exactly once
    Every message carries a key, and a key that is already claimed returns the
    existing message instead of creating one. So a Spark task that fails after its
    commit and is retried (or a whole job that is run again) creates nothing twice,
    as long as the first messages still exist, or were completed / dead-lettered
    within the channel's dedup window: set one with
    ``lonnymq.channel_set(channel, ..., p_dedup_window_ms => ...)`` longer than
    a re-run could come late, when consumers may complete messages before it.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lonnymq_dev.limits import MAX_BATCH, MAX_CHANNEL_CHARS, MAX_CONTENT_BYTES, MAX_KEY_CHARS

from .common import APPLICATION_NAME, PipelineError, Progress, check_connection

SAMPLE_SIZE = 5
SAMPLE_ROW_CHARS = 300
FAIL_AFTER_COMMIT_ENV = "LONNYMQ_PIPELINE_FAIL_AFTER_COMMIT"

# Hidden columns added on the JVM side (never part of content or derived keys).
_CHANNEL = "__lonnymq_channel"
_DEQUEUE_AT = "__lonnymq_dequeue_at"
_KEY = "__lonnymq_key"
_HIDDEN = (_CHANNEL, _DEQUEUE_AT, _KEY)

_BATCH_SQL = (
    "SELECT * FROM lonnymq.message_create_batch("
    "%s::text, %s::bytea[], %s::bigint[], %s::text[])"
)
_BATCH_SIGNATURE = "lonnymq.message_create_batch(text,bytea[],bigint[],text[])"
_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".json": "json",
            ".jsonl": "json", ".ndjson": "json"}


class InjectedFailure(RuntimeError):
    """Raised on purpose by a task after its commit (fault injection for tests)."""


@dataclass(frozen=True)
class EnqueueSpec:
    """Which columns make a message; see the module docstring."""

    channel: str | None = None
    channel_col: str | None = None
    content_col: str | None = None
    content_json: bool = False
    dequeue_at_col: str | None = None
    key_col: str | None = None
    batch_size: int = 1000

    def check(self, df: DataFrame) -> None:
        """Raise PipelineError for an unusable spec or a column the DataFrame lacks."""
        if (self.channel is None) == (self.channel_col is None):
            raise PipelineError("give exactly one of a fixed channel or a channel column")
        if self.channel is not None and not 1 <= len(self.channel) <= MAX_CHANNEL_CHARS:
            raise PipelineError(f"channel name must be 1 to {MAX_CHANNEL_CHARS} characters")
        if not 1 <= self.batch_size <= MAX_BATCH:
            raise PipelineError(f"batch size must be between 1 and {MAX_BATCH}")
        names = df.columns
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise PipelineError(f"duplicate column names: {', '.join(dupes)}")
        clash = [n for n in names if n in _HIDDEN]
        if clash:
            raise PipelineError(f"reserved column names: {', '.join(clash)}")
        for role, col in (("channel", self.channel_col), ("content", self.content_col),
                          ("dequeue_at", self.dequeue_at_col), ("key", self.key_col)):
            if col is not None and col not in names:
                raise PipelineError(f"{role} column {col!r} not in the input (columns: {', '.join(names)})")
        if self.content_col is not None and self.content_col == self.channel_col:
            raise PipelineError("the content column cannot be the channel column")


@dataclass(frozen=True)
class BadRow:
    """A row that cannot become a message."""

    partition: int
    reason: str
    row: str  # a truncated rendering of the input row

    def __str__(self) -> str:
        return f"partition {self.partition}: {self.reason}: {self.row}"


@dataclass
class EnqueueResult:
    """What an enqueue did. ``exit_code``: 0 when every row became a message."""

    rows: int = 0
    bad_rows: int = 0
    bad_sample: list[BadRow] = field(default_factory=list)
    skip_bad: bool = False
    written: bool = False  # the write job ran
    messages: int = 0  # ids returned: new messages, or existing ones with the same key
    dropped: int = 0  # NULL ids: the channel was at max_size
    partitions: int = 0
    retried_partitions: int = 0  # partitions whose successful attempt was not the first
    attempts: dict[int, int] = field(default_factory=dict)  # partition -> successful attempt number
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return 0 if self.bad_rows == 0 and self.dropped == 0 else 1

    def report(self) -> str:
        lines = [f"rows read: {self.rows}", f"bad rows: {self.bad_rows}"]
        if self.bad_rows:
            lines += [f"  {b}" for b in self.bad_sample]
            if self.bad_rows > len(self.bad_sample):
                lines.append(f"  ... and {self.bad_rows - len(self.bad_sample)} more")
        if not self.written:
            lines.append("nothing written: fix the bad rows, or pass --skip-bad to write the good ones")
        else:
            lines.append(f"messages enqueued (new, or already there with the same key): {self.messages}")
            if self.bad_rows:
                lines.append(f"bad rows skipped: {self.bad_rows}")
            if self.dropped:
                lines.append(f"dropped because a channel was at max_size: {self.dropped}")
            lines.append(f"partitions: {self.partitions}, retried after a failure: {self.retried_partitions}")
        lines.append(f"time: {self.seconds:.1f}s")
        return "\n".join(lines)


# ---------------------------------------------------------------------- input


def read_input(spark: SparkSession, path: str | Path, fmt: str | None = None,
               options: dict[str, str] | None = None) -> DataFrame:
    """Read Parquet, CSV (header row, inferred types) or JSON lines.

    fmt: parquet | csv | json; by default from the file name's extension (a
    directory: from the extension of the files in it).
    """
    p = Path(path)
    if fmt is None:
        suffix = p.suffix.lower()
        if not suffix and p.is_dir():
            suffixes = {f.suffix.lower() for f in p.rglob("*") if f.is_file() and f.suffix in _FORMATS}
            suffix = suffixes.pop() if len(suffixes) == 1 else ""
        fmt = _FORMATS.get(suffix)
        if fmt is None:
            raise PipelineError(f"cannot tell the format of {path}: pass --format parquet|csv|json")
    if fmt not in ("parquet", "csv", "json"):
        raise PipelineError(f"unknown format {fmt!r}")
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    try:
        return reader.load(str(path))
    except Exception as exc:  # AnalysisException: path does not exist, unreadable
        raise PipelineError(f"cannot read {path} as {fmt}: {str(exc).splitlines()[0]}") from exc


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _normalise(df: DataFrame, spec: EnqueueSpec) -> DataFrame:
    """Top-level timestamps as ISO 8601 text (JVM side: exact, in the session time
    zone, UTC by default), plus the hidden channel / dequeue_at / key columns."""
    cols = []
    types = {f.name: f.dataType for f in df.schema.fields}
    for name, dtype in types.items():
        c = F.col(_quote(name))
        if isinstance(dtype, T.TimestampType):
            c = F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
        elif isinstance(dtype, T.TimestampNTZType):
            c = F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
        cols.append(c.alias(name))
    if spec.channel_col is not None:
        cols.append(F.col(_quote(spec.channel_col)).cast("string").alias(_CHANNEL))
    if spec.dequeue_at_col is not None:
        dtype = types[spec.dequeue_at_col]
        c = F.col(_quote(spec.dequeue_at_col))
        if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
            c = F.floor(F.unix_micros(c.cast("timestamp")) / 1000)
        elif not isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
            raise PipelineError(f"dequeue_at column {spec.dequeue_at_col!r} is {dtype.simpleString()}: "
                                "use epoch milliseconds (an integer) or a timestamp")
        cols.append(c.cast("long").alias(_DEQUEUE_AT))
    if spec.key_col is not None:
        cols.append(F.col(_quote(spec.key_col)).cast("string").alias(_KEY))
    return df.select(*cols)


# ------------------------------------------------------------ rows -> messages


def _json_default(o: Any) -> Any:
    if isinstance(o, dt.datetime):
        if o.tzinfo is None:  # a nested TimestampType: Python gets local wall time
            o = dt.datetime.fromtimestamp(o.timestamp(), dt.timezone.utc)
        return o.isoformat()
    if isinstance(o, dt.date):
        return o.isoformat()
    if isinstance(o, decimal.Decimal):
        if o == o.to_integral_value():
            return int(o)
        f = float(o)
        return f if decimal.Decimal(repr(f)) == o else str(o)
    if isinstance(o, (bytes, bytearray)):
        return base64.b64encode(bytes(o)).decode("ascii")
    if isinstance(o, dt.timedelta):
        return o.total_seconds()
    if hasattr(o, "asDict"):  # a Row
        return o.asDict(recursive=True)
    raise TypeError(f"a {type(o).__name__} value")


def _to_json(value: Any, *, canonical: bool = False) -> str:
    return json.dumps(value, default=_json_default, ensure_ascii=False, separators=(",", ":"),
                      sort_keys=canonical, allow_nan=canonical)


def _plain(value: Any) -> Any:
    """Nested Rows -> dicts (lists and maps walked)."""
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _show(row: dict[str, Any]) -> str:
    text = repr(row)
    return text if len(text) <= SAMPLE_ROW_CHARS else text[: SAMPLE_ROW_CHARS - 3] + "..."


@dataclass(frozen=True)
class _Message:
    channel: str
    content: bytes
    dequeue_at: int | None
    key: str


class _Preparer:
    """Turns one normalised row into a _Message or a reason it cannot be one.
    Pickled into the tasks; deterministic, so a retried task prepares the same."""

    def __init__(self, spec: EnqueueSpec, columns: list[str], content_type: T.DataType | None) -> None:
        self.spec = spec
        self.columns = columns  # the input's columns, in order
        self.content_raw = content_type is not None and (
            isinstance(content_type, T.BinaryType)
            or (isinstance(content_type, T.StringType) and not spec.content_json))

    def __call__(self, row: Any) -> _Message | str:
        d = row.asDict(recursive=False)
        data = {c: _plain(d[c]) for c in self.columns}
        channel = self.spec.channel if self.spec.channel is not None else d[_CHANNEL]
        if channel is None:
            return "NULL channel"
        if not 1 <= len(channel) <= MAX_CHANNEL_CHARS:
            return f"channel name must be 1 to {MAX_CHANNEL_CHARS} characters, got {len(channel)}"
        if self.spec.content_col is None:
            value: Any = {c: v for c, v in data.items() if c != self.spec.channel_col}
        else:
            value = data[self.spec.content_col]
            if value is None:
                return "NULL content"
        if self.content_raw:
            content = bytes(value) if isinstance(value, (bytes, bytearray)) else str(value).encode("utf-8")
        else:
            try:
                content = _to_json(_plain(value)).encode("utf-8")
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                reason = str(exc)
                if "Out of range float" in reason:
                    reason = "NaN or Infinity"
                return f"unserialisable content: {reason}"
        if len(content) > MAX_CONTENT_BYTES:
            return f"content is {len(content)} bytes, the limit is {MAX_CONTENT_BYTES}"
        if self.spec.key_col is not None:
            key = d[_KEY]
            if key is None:
                return "NULL key"
        else:
            try:
                canonical = _to_json(data, canonical=True)
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                return f"cannot derive a key: {exc}"
            key = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        if not 1 <= len(key) <= MAX_KEY_CHARS:
            return f"key must be 1 to {MAX_KEY_CHARS} characters, got {len(key)}"
        dequeue_at = d.get(_DEQUEUE_AT)
        return _Message(channel, content, dequeue_at, key)

    def show(self, row: Any) -> str:
        d = row.asDict(recursive=False)
        return _show({c: _plain(d[c]) for c in self.columns})


def _validate_partition(index: int, rows: Iterable[Any], prep: _Preparer) -> Iterator[tuple[int, int, list[BadRow]]]:
    total = bad = 0
    sample: list[BadRow] = []
    for row in rows:
        total += 1
        msg = prep(row)
        if isinstance(msg, str):
            bad += 1
            if len(sample) < SAMPLE_SIZE:
                sample.append(BadRow(index, msg, prep.show(row)))
    yield total, bad, sample


class _ChannelBuffer:
    __slots__ = ("contents", "dequeue_at", "keys")

    def __init__(self) -> None:
        self.contents: list[bytes] = []
        self.dequeue_at: list[int | None] = []
        self.keys: list[str] = []


def _write_partition(index: int, rows: Iterable[Any], prep: _Preparer, dsn: str,
                     fail_after_commit: bool) -> Iterator[dict[str, int]]:
    """One partition, one connection, one transaction: all of it or nothing."""
    import psycopg
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    stats = {"partition": index, "attempt": attempt, "rows": 0, "bad": 0, "messages": 0, "dropped": 0}
    batch_size = prep.spec.batch_size
    with_dequeue_at = prep.spec.dequeue_at_col is not None
    buffers: dict[str, _ChannelBuffer] = {}

    def flush(cur: psycopg.Cursor, channel: str, buf: _ChannelBuffer) -> None:
        cur.execute(_BATCH_SQL, (channel, buf.contents, buf.dequeue_at if with_dequeue_at else None, buf.keys))
        ids = [r[0] for r in cur.fetchall()]
        if len(ids) != len(buf.keys):
            raise RuntimeError(f"message_create_batch returned {len(ids)} ids for {len(buf.keys)} messages")
        stats["messages"] += sum(1 for i in ids if i is not None)
        stats["dropped"] += sum(1 for i in ids if i is None)
        buf.contents, buf.dequeue_at, buf.keys = [], [], []

    # The connection's context commits on a clean exit and rolls back on an error.
    with psycopg.connect(dsn, autocommit=False, application_name=f"{APPLICATION_NAME} enqueue") as conn:
        with conn.cursor() as cur:
            for row in rows:
                stats["rows"] += 1
                msg = prep(row)
                if isinstance(msg, str):  # skipped (validated before: only with skip_bad)
                    stats["bad"] += 1
                    continue
                buf = buffers.get(msg.channel)
                if buf is None:
                    buf = buffers[msg.channel] = _ChannelBuffer()
                buf.contents.append(msg.content)
                buf.dequeue_at.append(msg.dequeue_at)
                buf.keys.append(msg.key)
                if len(buf.keys) >= batch_size:
                    flush(cur, msg.channel, buf)
            for channel, buf in buffers.items():
                if buf.keys:
                    flush(cur, channel, buf)
    if fail_after_commit and attempt == 0:
        raise InjectedFailure(f"injected failure after the commit of partition {index} (attempt {attempt})")
    yield stats


# ---------------------------------------------------------------------- driver


def enqueue(
    spark: SparkSession,
    df: DataFrame,
    dsn: str,
    spec: EnqueueSpec,
    *,
    skip_bad: bool = False,
    partitions: int | None = None,
    fail_after_commit: bool | None = None,
    progress: Progress | None = None,
) -> EnqueueResult:
    """Validate ``df`` and write its rows as messages (see the module docstring).

    skip_bad: write the good rows even when there are bad ones (still reported,
        exit code 1). Without it, a single bad row means nothing is written.
    partitions: repartition the input first (one transaction per partition).
    fail_after_commit: fault injection: every task raises after its commit on its
        first attempt, so Spark retries it (needs a master that retries tasks,
        e.g. ``local[2,4]``). Default: the environment variable
        LONNYMQ_PIPELINE_FAIL_AFTER_COMMIT=1, read on the driver.
    """
    progress = progress or Progress("enqueue")
    t0 = time.monotonic()
    spec.check(df)
    check_connection(dsn, need=(_BATCH_SIGNATURE,))
    if fail_after_commit is None:
        fail_after_commit = os.environ.get(FAIL_AFTER_COMMIT_ENV, "") not in ("", "0")
    if partitions is not None:
        if partitions < 1:
            raise PipelineError("partitions must be at least 1")
        df = df.repartition(partitions)
    content_type = df.schema[spec.content_col].dataType if spec.content_col else None
    prep = _Preparer(spec, list(df.columns), content_type)
    rdd = _normalise(df, spec).rdd
    sc = spark.sparkContext
    result = EnqueueResult(skip_bad=skip_bad, partitions=rdd.getNumPartitions())

    progress(f"validating {result.partitions} partition(s)")
    with progress.spark_job(sc, "validate"):
        parts = rdd.mapPartitionsWithIndex(lambda i, it: _validate_partition(i, it, prep)).collect()
    for total, bad, sample in parts:
        result.rows += total
        result.bad_rows += bad
        result.bad_sample.extend(sample)
    result.bad_sample = result.bad_sample[:SAMPLE_SIZE]
    progress(f"{result.rows} rows, {result.bad_rows} bad")

    if result.bad_rows and not skip_bad:
        result.seconds = time.monotonic() - t0
        progress("bad rows found: nothing written")
        return result

    progress(f"writing {result.partitions} partition(s), one transaction each"
             + (" (fault injection: every task fails after its first commit)" if fail_after_commit else ""))
    injected = bool(fail_after_commit)
    with progress.spark_job(sc, "write"):
        stats = rdd.mapPartitionsWithIndex(
            lambda i, it: _write_partition(i, it, prep, dsn, injected)).collect()
    result.written = True
    for s in stats:
        result.messages += s["messages"]
        result.dropped += s["dropped"]
        result.attempts[s["partition"]] = s["attempt"]
    result.retried_partitions = sum(1 for a in result.attempts.values() if a > 0)
    result.seconds = time.monotonic() - t0
    progress(f"{result.messages} messages in {result.seconds:.1f}s"
             + (f", {result.retried_partitions} partition(s) retried" if result.retried_partitions else ""))
    return result
