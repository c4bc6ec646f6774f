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
    headers     optional ``headers_col`` (lonnymq 0.16.0): a JSON object per message,
                NULL for none (doc/headers.md). A map or struct column becomes a
                JSON object by the rules of content (timestamps in ISO 8601, ...);
                a string column is parsed as JSON text, which must be an object
                (sent as given: jsonb keeps its numbers exactly). The column is
                part of neither the content nor the derived key.
    key         ``key_col`` (cast to text) or, without it, derived from the row:
                ``sha256:`` + the SHA-256 of the row's canonical JSON (all input
                columns but the headers column, sorted keys). Identical rows
                therefore make one message; give a key column when identical
                rows are distinct messages. The headers stay out so that a job
                re-run with new headers (a new trace context, say) creates
                nothing twice: a message keeps the headers of its first write.

How it is written
    1. A validation job turns every row into a message, once: the messages are
       kept (Spark's cache, serialised, spilling to disk) for the write job, and
       the bad rows (NULL channel or content, a value JSON cannot hold such as
       NaN, a channel name or key of the wrong length, content over 16 MiB,
       headers that are not a JSON object or are over 64 KiB) are reported with
       their count and a sample. With bad rows and without
       ``skip_bad`` nothing is written.
    2. A write job: each partition opens one connection and one transaction, sends
       its messages with ``lonnymq.message_create_batch`` in chunks of ``batch_size``
       per channel, and commits once. A partition is written entirely or not at all.

Headers' size
    The extension refuses headers over 65536 bytes of ``headers::text``: the
    jsonb's own text, which is not the text given (jsonb prints a space after
    every ``:`` and ``,``, numbers in plain notation with their scale, ``1e3``
    as ``1000``, duplicate keys once). The validation measures that text
    exactly, from the parsed JSON (what jsonb cannot hold, a string with
    ``\\u0000`` or a number beyond numeric's range, is a bad row too), so a
    row it passes is never refused by the server and one it refuses always
    would be.

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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lonnymq_dev.limits import MAX_BATCH, MAX_CHANNEL_CHARS, MAX_CONTENT_BYTES, MAX_HEADERS_BYTES, MAX_KEY_CHARS

from .common import APPLICATION_NAME, PipelineError, Progress, check_connection

SAMPLE_SIZE = 5
SAMPLE_ROW_CHARS = 300
FAIL_AFTER_COMMIT_ENV = "LONNYMQ_PIPELINE_FAIL_AFTER_COMMIT"

# Hidden columns added on the JVM side (never part of content or derived keys).
_CHANNEL = "__lonnymq_channel"
_DEQUEUE_AT = "__lonnymq_dequeue_at"
_KEY = "__lonnymq_key"
_HIDDEN = (_CHANNEL, _DEQUEUE_AT, _KEY)

# Parameters in binary: a bytea[] in text is hex for the client to write and
# the server to parse (a third of a batch's time, bench/pipeline.py).
# The headers go as text[] (JSON texts), which the server casts to jsonb[].
_BATCH_SQL = (
    "SELECT * FROM lonnymq.message_create_batch("
    "%b::text, %b::bytea[], %b::bigint[], %b::text[], %b::jsonb[])"
)
_BATCH_SIGNATURE = "lonnymq.message_create_batch(text,bytea[],bigint[],text[],jsonb[],bigint[],text)"
_BATCH_SINCE = "0.16.0"  # the first version with that signature (headers, p_after)
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
    headers_col: str | None = None
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
                          ("dequeue_at", self.dequeue_at_col), ("key", self.key_col),
                          ("headers", self.headers_col)):
            if col is not None and col not in names:
                raise PipelineError(f"{role} column {col!r} not in the input (columns: {', '.join(names)})")
        if self.content_col is not None and self.content_col == self.channel_col:
            raise PipelineError("the content column cannot be the channel column")
        if self.headers_col is not None:
            if self.headers_col in (self.channel_col, self.content_col):
                raise PipelineError("the headers column cannot be the channel or the content column")
            dtype = df.schema[self.headers_col].dataType
            if not isinstance(dtype, (T.MapType, T.StructType, T.StringType)):
                raise PipelineError(f"headers column {self.headers_col!r} is {dtype.simpleString()}: "
                                    "use a map, a struct or a string of JSON text")


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
    seconds: float = 0.0  # reading, checking and writing: after Spark started
    spark_start_seconds: float | None = None  # Spark's start-up, when the caller timed it

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
        if self.spark_start_seconds is None:
            lines.append(f"time: {self.seconds:.1f}s")
        else:
            lines.append(f"time: {self.seconds:.1f}s, after {self.spark_start_seconds:.1f}s starting Spark")
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


# Built once: json.dumps with options builds a new encoder per call.
_CONTENT_JSON = json.JSONEncoder(default=_json_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_CANONICAL_JSON = json.JSONEncoder(default=_json_default, ensure_ascii=False, separators=(",", ":"),
                                   sort_keys=True, allow_nan=True)


# ------------------------------------------------------------------ headers

_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_json(text: str) -> Any:
    """JSON text as PostgreSQL's json parser reads it: numbers as Decimals (exact,
    of any size), NaN and Infinity refused."""
    return json.loads(text, parse_float=decimal.Decimal, parse_int=decimal.Decimal,
                      parse_constant=_no_constant)


def _jsonb_string_bytes(s: str) -> int:
    # jsonb escapes as json does with ensure_ascii off: '"', '\\' and the
    # control characters; every other character as its UTF-8.
    if "\x00" in s:
        raise ValueError("a \\u0000 in a string, which jsonb cannot hold")
    try:
        return len(json.encoder.encode_basestring(s).encode("utf-8"))
    except UnicodeEncodeError as exc:  # a lone surrogate, from a \\ud800 escape
        raise ValueError(f"a lone surrogate (\\u{ord(exc.object[exc.start]):04x}), which jsonb cannot hold") from None


# numeric's range that the size alone does not exclude: at most 16383 digits
# after the point (NUMERIC_DSCALE_MAX: '1e-16384' overflows), and an exponent
# that fits in half an int32 ('0e2147483648' overflows, '0e1000000' is 0).
_NUMERIC_DSCALE_MAX = 16383
_NUMERIC_EXPONENT_MAX = 2**31 // 2 - 1


def _jsonb_number_bytes(d: decimal.Decimal) -> int:
    # numeric's text: plain notation with the scale it was given (1e3 -> 1000,
    # 1.50 -> 1.50, 1e-3 -> 0.001, 0e5 -> 0), no negative zero. Counted, not
    # printed: 1e60000 is 60,001 bytes.
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)  # (no NaN: _parse_json refuses it)
    scale = max(0, -exponent)
    if scale > _NUMERIC_DSCALE_MAX or abs(exponent) >= _NUMERIC_EXPONENT_MAX:
        raise ValueError(f"the number {d} is out of numeric's range")
    if d.is_zero():
        return 1 if scale == 0 else 2 + scale  # 0, 0.000
    n = len(digits)
    if exponent >= 0:
        size = n + exponent
    else:
        size = n + 1 if n > scale else 2 + scale  # 12.5, 0.0125
    return size + sign


def jsonb_text_bytes(value: Any) -> int:
    """``octet_length(v::jsonb::text)`` in PostgreSQL, for a value of _parse_json:
    jsonb prints ``{"a": 1, "b": [1, 2]}``, a space after every ':' and ','.
    ValueError for a value jsonb refuses (a string with \\u0000 or a lone
    surrogate, a number out of numeric's range)."""
    if isinstance(value, dict):
        return max(2, 2 * len(value)) + sum(_jsonb_string_bytes(k) + 2 + jsonb_text_bytes(v) for k, v in value.items())
    if isinstance(value, list):
        return max(2, 2 * len(value)) + sum(jsonb_text_bytes(v) for v in value)
    if isinstance(value, str):
        return _jsonb_string_bytes(value)
    if isinstance(value, bool):
        return 4 if value else 5
    if value is None:
        return 4
    if isinstance(value, (int, float)):
        value = decimal.Decimal(repr(value))  # what json.dumps writes, read back
    return _jsonb_number_bytes(value)


def _headers_json(value: Any) -> tuple[str | None, str | None]:
    """A headers column's value -> (the JSON text to send, None) or (None, why
    it is a bad row). NULL: (None, None). A string is JSON text, sent as given;
    anything else (a dict: a map or struct) is serialised as content is."""
    if value is None:
        return None, None
    if isinstance(value, str):
        text = value
        try:
            parsed = _parse_json(text)
        except (ValueError, RecursionError) as exc:
            return None, f"headers are not JSON: {exc}"
    else:
        try:
            text = _CONTENT_JSON.encode(_plain(value))
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            reason = str(exc)
            return None, "unserialisable headers: " + ("NaN or Infinity" if "Out of range float" in reason else reason)
        parsed = _parse_json(text)
    if not isinstance(parsed, dict):
        kind = _JSON_TYPES.get(type(parsed), "number")
        return None, f"headers must be a JSON object, got a JSON {kind}"
    try:
        size = jsonb_text_bytes(parsed)
    except ValueError as exc:
        return None, f"headers cannot be jsonb: {exc}"
    if size > MAX_HEADERS_BYTES:
        return None, f"headers are {size} bytes of JSON text, the limit is {MAX_HEADERS_BYTES}"
    return text, None


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


class _Message(NamedTuple):
    """A row as a message (a row of PREPARED_SCHEMA)."""

    channel: str
    content: bytes
    dequeue_at: int | None
    key: str
    headers: str | None = None  # JSON text


def _fields(spec: EnqueueSpec, columns: list[str]) -> list[str]:
    """The normalised frame's columns: the input's, then the hidden ones (_normalise)."""
    hidden = [(spec.channel_col, _CHANNEL), (spec.dequeue_at_col, _DEQUEUE_AT), (spec.key_col, _KEY)]
    return list(columns) + [name for col, name in hidden if col is not None]


class _Preparer:
    """Turns one normalised row (its values in _fields order: a tuple, or a
    Row) into a _Message or a reason it cannot be one. Pickled into the
    tasks; deterministic, so a retried task prepares the same.

    This is the pipeline's cost per row in Python: positions are found once,
    and only the columns that can hold Rows are walked (``nested``)."""

    def __init__(self, spec: EnqueueSpec, columns: list[str], content_type: T.DataType | None,
                 nested: frozenset[str] | None = None) -> None:
        self.spec = spec
        self.content_raw = content_type is not None and (
            isinstance(content_type, T.BinaryType)
            or (isinstance(content_type, T.StringType) and not spec.content_json))
        pos = {name: i for i, name in enumerate(_fields(spec, columns))}
        # (name, position, may hold Rows); nested None (types unknown): every column.
        self._data = [(c, pos[c], nested is None or c in nested) for c in columns]
        # The derived key's columns: all but the headers; the content's: those
        # but the channel.
        self._keyed = [d for d in self._data if d[0] != spec.headers_col]
        self._content = [d for d in self._keyed if d[0] != spec.channel_col]
        self._headers_pos = pos[spec.headers_col] if spec.headers_col is not None else None
        self._channel_pos = pos.get(_CHANNEL)
        self._key_pos = pos.get(_KEY)
        self._dequeue_at_pos = pos.get(_DEQUEUE_AT)
        self._content_pos = pos[spec.content_col] if spec.content_col is not None else None

    def __call__(self, row: Sequence[Any]) -> _Message | str:
        row = tuple(row)  # Row.__getitem__ is Python code; a tuple's is not
        spec = self.spec
        channel = spec.channel if spec.channel is not None else row[self._channel_pos]
        if channel is None:
            return "NULL channel"
        if not 1 <= len(channel) <= MAX_CHANNEL_CHARS:
            return f"channel name must be 1 to {MAX_CHANNEL_CHARS} characters, got {len(channel)}"
        if spec.content_col is None:
            value: Any = {c: (_plain(row[i]) if deep else row[i]) for c, i, deep in self._content}
        else:
            value = _plain(row[self._content_pos])
            if value is None:
                return "NULL content"
        if self.content_raw:
            content = bytes(value) if isinstance(value, (bytes, bytearray)) else str(value).encode("utf-8")
        else:
            try:
                content = _CONTENT_JSON.encode(value).encode("utf-8")
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                reason = str(exc)
                if "Out of range float" in reason:
                    reason = "NaN or Infinity"
                return f"unserialisable content: {reason}"
        if len(content) > MAX_CONTENT_BYTES:
            return f"content is {len(content)} bytes, the limit is {MAX_CONTENT_BYTES}"
        if spec.key_col is not None:
            key = row[self._key_pos]
            if key is None:
                return "NULL key"
        else:
            data = {c: (_plain(row[i]) if deep else row[i]) for c, i, deep in self._keyed}
            try:
                canonical = _CANONICAL_JSON.encode(data)
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                return f"cannot derive a key: {exc}"
            key = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        if not 1 <= len(key) <= MAX_KEY_CHARS:
            return f"key must be 1 to {MAX_KEY_CHARS} characters, got {len(key)}"
        headers = None
        if self._headers_pos is not None:
            headers, reason = _headers_json(row[self._headers_pos])
            if reason is not None:
                return reason
        dequeue_at = row[self._dequeue_at_pos] if self._dequeue_at_pos is not None else None
        return _Message(channel, content, dequeue_at, key, headers)

    def show(self, row: Sequence[Any]) -> str:
        row = tuple(row)
        return _show({c: _plain(row[i]) for c, i, _ in self._data})


# ------------------------------------------------------- rows through Arrow

# The rows reach Python, and the messages go back to Spark's cache, as Arrow
# batches (mapInArrow): half the cost per row of pickled Rows (bench/pipeline.py).
PREPARED_SCHEMA = ("channel string, content binary, dequeue_at long, key string, headers string, "
                   "bad string, shown string")
WRITTEN_SCHEMA = "partition long, attempt long, rows long, bad long, messages long, dropped long"
# An output batch is cut after this many bytes of contents and keys: an
# Arrow binary or string column holds at most 2 GiB.
_PREPARED_BATCH_BYTES = 64 << 20


def _from_arrow(dtype: T.DataType) -> Callable[[Any], Any] | None:
    """What makes a value of this type, as Arrow gives it to Python, the value a
    Row gives (made plain): a map arrives as a list of (key, value) pairs. None:
    nothing to do. Structs arrive as dicts, as _plain makes them."""
    if isinstance(dtype, T.MapType):
        k, v = _from_arrow(dtype.keyType) or _same, _from_arrow(dtype.valueType) or _same
        return lambda m: None if m is None else {k(a): v(b) for a, b in m}
    if isinstance(dtype, T.ArrayType):
        e = _from_arrow(dtype.elementType)
        return None if e is None else (lambda xs: None if xs is None else [e(x) for x in xs])
    if isinstance(dtype, T.StructType):
        fs = [(f.name, _from_arrow(f.dataType)) for f in dtype.fields]
        if all(c is None for _, c in fs):
            return None
        return lambda d: None if d is None else {n: (c(d[n]) if c else d[n]) for n, c in fs}
    return None


def _same(x: Any) -> Any:
    return x


def _prepare_batches(batches: Iterable[Any], prep: _Preparer,
                     converters: list[tuple[int, Callable[[Any], Any]]]) -> Iterator[Any]:
    """mapInArrow: normalised rows -> PREPARED_SCHEMA (a bad row: `bad` says why)."""
    import pyarrow as pa

    schema = _arrow_prepared_schema()
    out: dict[str, list[Any]] = {n: [] for n in schema.names}
    size = 0

    def emit() -> Any:
        nonlocal out, size
        batch = pa.RecordBatch.from_pydict(out, schema=schema)
        out, size = {n: [] for n in out}, 0
        return batch

    for batch in batches:
        cols = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        for i, convert in converters:
            cols[i] = [convert(v) for v in cols[i]]
        for row in zip(*cols):
            msg = prep(row)
            if isinstance(msg, str):
                for n, v in (("channel", None), ("content", None), ("dequeue_at", None), ("key", None),
                             ("headers", None), ("bad", msg), ("shown", prep.show(row))):
                    out[n].append(v)
                continue
            out["channel"].append(msg.channel)
            out["content"].append(msg.content)
            out["dequeue_at"].append(msg.dequeue_at)
            out["key"].append(msg.key)
            out["headers"].append(msg.headers)
            out["bad"].append(None)
            out["shown"].append(None)
            size += len(msg.content) + len(msg.key) + (len(msg.headers) if msg.headers is not None else 0)
            if size >= _PREPARED_BATCH_BYTES:
                yield emit()
        if out["bad"]:  # one batch out per batch in, as large as Spark's
            yield emit()


def _arrow_prepared_schema() -> Any:
    """PREPARED_SCHEMA in Arrow (pyarrow is imported in the tasks only)."""
    import pyarrow as pa

    return pa.schema([("channel", pa.string()), ("content", pa.binary()), ("dequeue_at", pa.int64()),
                      ("key", pa.string()), ("headers", pa.string()), ("bad", pa.string()),
                      ("shown", pa.string())])


class _ChannelBuffer:
    __slots__ = ("contents", "dequeue_at", "headers", "keys")

    def __init__(self) -> None:
        self.contents: list[bytes] = []
        self.dequeue_at: list[int | None] = []
        self.keys: list[str] = []
        self.headers: list[str | None] = []


def _write_batches(batches: Iterable[Any], spec: EnqueueSpec, dsn: str, fail_after_commit: bool) -> Iterator[Any]:
    """mapInArrow: one partition of prepared messages, one connection, one
    transaction: all of it or nothing. Yields WRITTEN_SCHEMA's one row."""
    import psycopg
    import pyarrow as pa
    from pyspark import TaskContext

    ctx = TaskContext.get()
    index = ctx.partitionId() if ctx is not None else 0
    attempt = ctx.attemptNumber() if ctx is not None else 0
    stats = {"partition": index, "attempt": attempt, "rows": 0, "bad": 0, "messages": 0, "dropped": 0}
    batch_size = spec.batch_size
    with_dequeue_at = spec.dequeue_at_col is not None
    with_headers = spec.headers_col is not None
    buffers: dict[str, _ChannelBuffer] = {}

    def flush(cur: psycopg.Cursor, channel: str, buf: _ChannelBuffer) -> None:
        cur.execute(_BATCH_SQL, (channel, buf.contents, buf.dequeue_at if with_dequeue_at else None, buf.keys,
                                 buf.headers if with_headers else None))
        ids = [r[0] for r in cur.fetchall()]
        if len(ids) != len(buf.keys):
            raise RuntimeError(f"message_create_batch returned {len(ids)} ids for {len(buf.keys)} messages")
        dropped = ids.count(None)
        stats["messages"] += len(ids) - dropped
        stats["dropped"] += dropped
        buf.contents, buf.dequeue_at, buf.keys, buf.headers = [], [], [], []

    # The connection's context commits on a clean exit and rolls back on an error.
    with psycopg.connect(dsn, autocommit=False, application_name=f"{APPLICATION_NAME} enqueue") as conn:
        with conn.cursor() as cur:
            for batch in batches:
                stats["rows"] += batch.num_rows
                cols = batch.select(["channel", "content", "dequeue_at", "key", "headers", "bad"]).to_pydict()
                for channel, content, dequeue_at, key, headers, bad in zip(
                        cols["channel"], cols["content"], cols["dequeue_at"], cols["key"], cols["headers"],
                        cols["bad"]):
                    if bad is not None:  # skipped (reported by the validation: only with skip_bad)
                        stats["bad"] += 1
                        continue
                    buf = buffers.get(channel)
                    if buf is None:
                        buf = buffers[channel] = _ChannelBuffer()
                    buf.contents.append(content)
                    buf.dequeue_at.append(dequeue_at)
                    buf.keys.append(key)
                    buf.headers.append(headers)
                    if len(buf.keys) >= batch_size:
                        flush(cur, channel, buf)
            for channel, buf in buffers.items():
                if buf.keys:
                    flush(cur, channel, buf)
    if fail_after_commit and attempt == 0:
        raise InjectedFailure(f"injected failure after the commit of partition {index} (attempt {attempt})")
    yield pa.RecordBatch.from_pylist([stats])


# ---------------------------------------------------------------------- driver


def prepare(df: DataFrame, spec: EnqueueSpec) -> DataFrame:
    """``df``'s rows as messages, one row each, in PREPARED_SCHEMA: channel,
    content, dequeue_at, key and headers (JSON text or NULL), or ``bad`` (why the row cannot be a message)
    and ``shown`` (the row, truncated). Lazy, as any DataFrame."""
    content_type = df.schema[spec.content_col].dataType if spec.content_col else None
    nested = frozenset(f.name for f in df.schema.fields
                       if isinstance(f.dataType, (T.StructType, T.ArrayType, T.MapType)))
    prep = _Preparer(spec, list(df.columns), content_type, nested)
    normalised = _normalise(df, spec)
    converters = [(i, c) for i, f in enumerate(normalised.schema.fields)
                  if (c := _from_arrow(f.dataType)) is not None]
    return normalised.mapInArrow(lambda it: _prepare_batches(it, prep, converters), PREPARED_SCHEMA)


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
    check_connection(dsn, need=(_BATCH_SIGNATURE,), since=_BATCH_SINCE)
    if fail_after_commit is None:
        fail_after_commit = os.environ.get(FAIL_AFTER_COMMIT_ENV, "") not in ("", "0")
    if partitions is not None:
        if partitions < 1:
            raise PipelineError("partitions must be at least 1")
        df = df.repartition(partitions)
    # Every row is turned into a message once, by the validation job, and kept
    # in Spark's cache (spilling to disk) for the write job. A lost block is
    # made again from the input: the same messages, since preparing is
    # deterministic.
    prepared = prepare(df, spec).persist(StorageLevel.MEMORY_AND_DISK)
    sc = spark.sparkContext
    result = EnqueueResult(skip_bad=skip_bad, partitions=prepared.rdd.getNumPartitions())
    try:
        _validate_and_write(sc, prepared, dsn, spec, result, fail_after_commit, progress)
    finally:
        prepared.unpersist()
    result.seconds = time.monotonic() - t0
    if result.written:
        progress(f"{result.messages} messages in {result.seconds:.1f}s"
                 + (f", {result.retried_partitions} partition(s) retried" if result.retried_partitions else ""))
    return result


def _validate_and_write(sc: Any, prepared: DataFrame, dsn: str, spec: EnqueueSpec, result: EnqueueResult,
                        fail_after_commit: bool, progress: Progress) -> None:
    progress(f"validating {result.partitions} partition(s)")
    with progress.spark_job(sc, "validate"):
        result.rows, result.bad_rows = prepared.agg(F.count(F.lit(1)), F.count("bad")).first()
        if result.bad_rows:  # (another pass over the cache: only when there is something to show)
            sample = prepared.where(F.col("bad").isNotNull()).select(
                F.spark_partition_id().alias("partition"), "bad", "shown").limit(SAMPLE_SIZE).collect()
            result.bad_sample = [BadRow(r["partition"], r["bad"], r["shown"]) for r in sample]
    progress(f"{result.rows} rows, {result.bad_rows} bad")

    if result.bad_rows and not result.skip_bad:
        progress("bad rows found: nothing written")
        return

    progress(f"writing {result.partitions} partition(s), one transaction each"
             + (" (fault injection: every task fails after its first commit)" if fail_after_commit else ""))
    injected = bool(fail_after_commit)
    with progress.spark_job(sc, "write"):
        stats = prepared.mapInArrow(lambda it: _write_batches(it, spec, dsn, injected), WRITTEN_SCHEMA).collect()
    result.written = True
    for s in stats:
        result.messages += s["messages"]
        result.dropped += s["dropped"]
        result.attempts[s["partition"]] = s["attempt"]
    result.retried_partitions = sum(1 for a in result.attempts.values() if a > 0)
