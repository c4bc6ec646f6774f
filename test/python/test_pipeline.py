"""The Spark pipeline (pipeline/): exactly-once enqueue under a task retry, bad rows,
export round trip, load generation.

One SparkSession for the module, ``local[2,4]``: two task slots, and a failed
task is retried (up to 3 times), which the fault injection relies on. Needs
pyspark (the dev extra) and a Java 17+ runtime.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from conftest import REPO_ROOT
from pipeline import (
    EnqueueSpec,
    LoadgenConfig,
    PipelineError,
    enqueue,
    export,
    get_spark,
    run_loadgen,
)
from pipeline.export import _ranges

from lonnymq_dev.calls import dequeue, complete

MASTER = "local[2,4]"


@pytest.fixture(scope="module")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = get_spark(MASTER, conf={
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
    })
    yield session
    session.stop()


def _messages(db) -> list[tuple[str, str, bytes]]:
    return db.call("SELECT m.channel, m.key, m.content FROM lonnymq.message AS m ORDER BY m.id")


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "LONNYMQ_PIPELINE"))}
    env["PYSPARK_PYTHON"] = sys.executable
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------ enqueue


def test_enqueue_is_exactly_once_when_tasks_fail_after_their_commit(spark, db):
    due0 = 1_700_000_000_000  # dequeue_at, epoch ms (in the past: deliverable)
    rows = [(f"ch{i % 2}", i, f"payload {i}", i / 4, due0 + i) for i in range(60)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2),
                               "channel string, n int, text string, x double, due long")
    # Several batches per channel and partition.
    spec = EnqueueSpec(channel_col="channel", dequeue_at_col="due", batch_size=7)

    result = enqueue(spark, df, db.dsn, spec, fail_after_commit=True)

    # Every partition committed, failed, and succeeded on its second attempt.
    assert result.attempts == {0: 1, 1: 1}, result.report()
    assert result.retried_partitions == 2
    assert (result.rows, result.bad_rows, result.messages, result.exit_code) == (60, 0, 60, 0)
    stored = _messages(db)
    assert Counter(ch for ch, _, _ in stored) == {"ch0": 30, "ch1": 30}
    assert len({(ch, key) for ch, key, _ in stored}) == 60
    assert all(key.startswith("sha256:") for _, key, _ in stored)
    # Content: the row without its channel column, as JSON.
    assert sorted((json.loads(c) for _, _, c in stored), key=lambda d: d["n"]) == [
        {"n": n, "text": text, "x": x, "due": due} for _, n, text, x, due in rows]
    assert db.call("SELECT count(*) FROM lonnymq.message"
                   " WHERE dequeue_at = %s + (convert_from(content, 'UTF8')::jsonb->>'n')::bigint", (due0,)) == [(60,)]

    # The whole job again (no failure): the derived keys find every message.
    again = enqueue(spark, df, db.dsn, spec)
    assert (again.messages, again.retried_partitions, again.exit_code) == (60, 0, 0)
    assert len(_messages(db)) == 60


def test_rows_become_messages_deterministically():
    """The row -> message conversion on its own (no Spark job): content, keys, reasons."""
    import datetime as dt
    import decimal

    from pyspark.sql import Row
    from pyspark.sql import types as T

    from pipeline.enqueue import _Preparer

    cols = ["ch", "blob", "amount", "day", "tags", "inner"]
    prep = _Preparer(EnqueueSpec(channel_col="ch"), cols, None)

    def row(**kw):
        values = {"ch": "c", "blob": b"\x00\xff", "amount": decimal.Decimal("12.50"), "day": dt.date(2026, 1, 2),
                  "tags": ["a", "b"], "inner": Row(x=1, y=None)}
        values.update(kw)
        return Row(**values, __lonnymq_channel=values["ch"])

    msg = prep(row())
    assert json.loads(msg.content) == {"blob": "AP8=", "amount": 12.5, "day": "2026-01-02", "tags": ["a", "b"],
                                       "inner": {"x": 1, "y": None}}
    assert msg.channel == "c" and msg.dequeue_at is None
    assert prep(row()).key == msg.key and msg.key.startswith("sha256:") and len(msg.key) == 71
    assert prep(row(tags=["a", "c"])).key != msg.key
    assert prep(row(ch=None)) == "NULL channel"
    assert prep(row(ch="x" * 256)).startswith("channel name must be 1 to 255")
    assert prep(row(inner=Row(x=float("inf"), y=None))) == "unserialisable content: NaN or Infinity"

    raw = _Preparer(EnqueueSpec(channel="fixed", content_col="blob"), cols, T.BinaryType())
    assert raw(row()).content == b"\x00\xff" and raw(row()).channel == "fixed"
    assert raw(row(blob=None)) == "NULL content"
    text = _Preparer(EnqueueSpec(channel="fixed", content_col="ch"), cols, T.StringType())
    assert text(row(ch="héllo")).content == "héllo".encode()
    as_json = _Preparer(EnqueueSpec(channel="fixed", content_col="ch", content_json=True), cols, T.StringType())
    assert as_json(row(ch="héllo")).content == '"héllo"'.encode()


def test_messages_and_derived_keys_are_those_of_earlier_pipelines(spark):
    """A job re-run after the pipeline is upgraded must find its messages: the
    contents and derived keys below are what the pipeline of lonnymq 0.12.0
    (pickled Rows) made of these rows; 0.13.0 reads them as Arrow batches."""
    import datetime as dt
    import decimal

    from pipeline.enqueue import prepare

    utc = dt.timezone.utc
    rows = [
        ("orders", 1, 0.1, decimal.Decimal("12.5000"), dt.date(2026, 1, 2),
         dt.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=utc), b"\x00\xff", ["a", "b"],
         (7, dt.datetime(2026, 2, 1, 1, 2, 3, 4, tzinfo=utc), {"k": 1}), {"x": (1.5,)}),
        ("emails", 2, -3.25, decimal.Decimal("0.0001"), dt.date(2000, 2, 29),
         dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=utc), b"", None, None, {}),
    ]
    df = spark.createDataFrame(rows, "ch string, n int, x double, dec decimal(12,4), day date, ts timestamp, "
                                     "bin binary, tags array<string>, "
                                     "inner struct<a:int, t:timestamp, m:map<string,int>>, m map<string,struct<q:double>>")
    got = {r["channel"]: (bytes(r["content"]), r["key"], r["bad"])
           for r in prepare(df, EnqueueSpec(channel_col="ch")).collect()}
    assert got == {
        "orders": (b'{"n":1,"x":0.1,"dec":12.5,"day":"2026-01-02","ts":"2026-01-02T03:04:05.600000Z","bin":"AP8=",'
                   b'"tags":["a","b"],"inner":{"a":7,"t":"2026-02-01T01:02:03.000004+00:00","m":{"k":1}},'
                   b'"m":{"x":{"q":1.5}}}',
                   "sha256:f1a9a1795cfc8ac1b7da583552baf93944e5fab3ff0ce716cd188bf60c79e975", None),
        "emails": (b'{"n":2,"x":-3.25,"dec":0.0001,"day":"2000-02-29","ts":"1999-12-31T23:59:59.000000Z","bin":"",'
                   b'"tags":null,"inner":null,"m":{}}',
                   "sha256:c5cc1090dc530b2bacaf482b485e32bde431b82fb059210079b49b78685f8d60", None),
    }


def _bad_input(spark, path) -> list[tuple]:
    rows = [
        ("good", "k1", (1.0, "a")),
        ("good", "k2", (2.0, "b")),
        (None, "k3", (3.0, "c")),  # NULL channel
        ("good", "k4", None),  # NULL content
        ("good", "k5", (float("nan"), "e")),  # NaN: not JSON
        ("other", "k6", (6.0, None)),
        ("other", "k7", (7.0, "g")),
    ]
    spark.createDataFrame(rows, "channel string, id string, payload struct<v: double, s: string>") \
        .coalesce(1).write.mode("overwrite").parquet(str(path))
    return rows


def test_bad_rows_are_reported_and_nothing_is_half_written(spark, db, tmp_path):
    path = tmp_path / "in.parquet"
    rows = _bad_input(spark, path)

    proc = _cli("enqueue", str(path), "--channel-col", "channel", "--content-col", "payload", "--key-col", "id",
                "--dsn", db.dsn, "--master", "local[1]")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "bad rows: 3" in out
    for reason in ("NULL channel", "NULL content", "unserialisable content: NaN or Infinity"):
        assert reason in out, out
    assert "'k3'" in out and "'k4'" in out and "'k5'" in out  # the sample shows the rows
    assert "nothing written" in out
    assert "validate" in proc.stderr  # progress lines on stderr
    # Each job's last progress line counts every task it ran as done (not the
    # tasks of stages Spark skipped), and the time says what it leaves out.
    finals = {m.group(1): (int(m.group(2)), int(m.group(3)))
              for m in re.finditer(r"enqueue: ([a-z ]+): (\d+)/(\d+) tasks done", proc.stderr)}
    assert "validate" in finals and all(done == total for done, total in finals.values()), proc.stderr
    assert re.search(r"^time: [0-9.]+s, after [0-9.]+s starting Spark$", out, re.M), out
    assert _messages(db) == []

    # --skip-bad (here through the function): the good rows, and the bad ones reported.
    df = spark.read.parquet(str(path))
    result = enqueue(spark, df, db.dsn, EnqueueSpec(channel_col="channel", content_col="payload", key_col="id"),
                     skip_bad=True)
    assert (result.rows, result.bad_rows, result.messages, result.exit_code) == (7, 3, 4, 1)
    assert sorted(b.reason for b in result.bad_sample) == [
        "NULL channel", "NULL content", "unserialisable content: NaN or Infinity"]
    stored = _messages(db)
    assert sorted((ch, key, json.loads(c)) for ch, key, c in stored) == sorted(
        (ch, key, {"v": p[0], "s": p[1]}) for ch, key, p in rows if key in ("k1", "k2", "k6", "k7"))


def test_cli_usage_and_connection_errors_exit_2(db):
    proc = _cli("enqueue", "x.parquet", "--channel", "a", "--channel-col", "b", "--dsn", db.dsn)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
    proc = _cli("enqueue", "x.parquet", "--channel", "a", "--dsn", "host=/nonexistent port=1 connect_timeout=2")
    assert proc.returncode == 2 and "cannot connect" in proc.stderr, proc.stderr


# ------------------------------------------------------------------ headers

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_limits_the_pipeline_checks_are_the_extensions(db):
    from lonnymq_dev.limits import MAX_CONTENT_BYTES, MAX_HEADERS_BYTES

    assert db.call("SELECT lonnymq._max_content_bytes(), lonnymq._max_headers_bytes()") == [
        (MAX_CONTENT_BYTES, MAX_HEADERS_BYTES)]


# JSON texts whose jsonb text differs from them: spacing, numbers in plain
# notation with their scale, no negative zero, repeated keys, escapes, UTF-8.
_JSONB_TEXTS = [
    '{}', '{"a":[]}', '{"a":{}}', '{"a":[[],[[]],{}]}', '{"a":[1,2,{"b":null}],"c":true,"d":false}',
    '{"x":1e20,"y":-0.0,"z":1.5e-7,"w":1.50,"v":-0,"u":1E+2,"t":0e-5,"s":1.23e1}',
    '{"n":123456789012345678901234567890.5,"m":1e-1001,"l":1e-16383,"k":1e60000,"j":0e1000000,"i":-0.5e-2}',
    '{"a":"x\\u0001\\n\\t\\"\\\\\\/\\u007f é😀"}', '{"a":1,"a":2,"b":3}',
    '  {"a" : [ ] , "b" :  "\\u00e9\\ud83d\\ude00" }  ', '{"é😀": 12.0000}',
]


def test_headers_are_measured_as_postgresql_prints_jsonb(db):
    """The validation's length of headers is octet_length(headers::text), exactly:
    so the pipeline refuses what message_create_batch would, and nothing else."""
    from pipeline.enqueue import _headers_json, _parse_json, jsonb_text_bytes

    from lonnymq_dev.limits import MAX_HEADERS_BYTES

    conn = db.connect()
    for text in _JSONB_TEXTS:
        assert jsonb_text_bytes(_parse_json(text)) == conn.execute(
            "SELECT octet_length(%s::jsonb::text)", (text,)).fetchone()[0], text
    # A map or struct's headers: as content is serialised (floats as Python writes them).
    text, bad = _headers_json({"f": 0.1, "g": 1e16, "h": 1e-7, "i": 2**70, "j": -2.5e-300, "k": [1.0, None]})
    assert bad is None and jsonb_text_bytes(_parse_json(text)) == conn.execute(
        "SELECT octet_length(%s::jsonb::text)", (text,)).fetchone()[0]

    # At the limit. Compact, both are under it (by 5 and 4 bytes); jsonb's
    # five spaces put the first at it and the second one byte over.
    def headers(filler: int) -> str:
        return json.dumps({"a": "x" * filler, "b": 1, "c": 2}, separators=(",", ":"))

    at, over = headers(MAX_HEADERS_BYTES - 25), headers(MAX_HEADERS_BYTES - 24)
    assert (len(at), len(over)) == (MAX_HEADERS_BYTES - 5, MAX_HEADERS_BYTES - 4)
    assert _headers_json(at) == (at, None)
    assert _headers_json(over) == (None, f"headers are {MAX_HEADERS_BYTES + 1} bytes of JSON text, "
                                         f"the limit is {MAX_HEADERS_BYTES}")
    assert conn.execute("SELECT lonnymq.message_create('limit', 'x', p_headers => %s::jsonb) IS NOT NULL",
                        (at,)).fetchone()[0]
    with pytest.raises(Exception, match="65537 bytes of JSON") as err:
        conn.execute("SELECT lonnymq.message_create('limit', 'x', p_headers => %s::jsonb)", (over,))
    assert err.value.sqlstate == "22023"

    # What jsonb cannot hold, or is not an object.
    for value, reason in [
        ("[1, 2]", "headers must be a JSON object, got a JSON array"),
        ('"text"', "headers must be a JSON object, got a JSON string"),
        ("12", "headers must be a JSON object, got a JSON number"),
        ("null", "headers must be a JSON object, got a JSON null"),
        ("{'a': 1}", "headers are not JSON: Expecting property name enclosed in double quotes"),
        ('{"a": NaN}', "headers are not JSON: NaN is not JSON"),
        ('{"a": "\\u0000"}', "headers cannot be jsonb: a \\u0000 in a string, which jsonb cannot hold"),
        ('{"a": "\\ud800"}', "headers cannot be jsonb: a lone surrogate (\\ud800), which jsonb cannot hold"),
        ('{"a": 1.5e-16383}', "headers cannot be jsonb: the number 1.5E-16383 is out of numeric's range"),
        ({"a": float("inf")}, "unserialisable headers: NaN or Infinity"),
        ({"a": "\x00"}, "headers cannot be jsonb: a \\u0000 in a string, which jsonb cannot hold"),
    ]:
        sent, bad = _headers_json(value)
        assert sent is None and bad is not None and bad.startswith(reason), (value, bad)
        if isinstance(value, str) and "NaN" not in value and "'" not in value:  # the server refuses it too
            with pytest.raises(Exception) as err:
                conn.execute("SELECT lonnymq.message_create('limit', 'x', p_headers => %s::jsonb)", (value,))
            assert err.value.sqlstate in ("22023", "22P02", "22P05", "22003"), err.value
    assert _headers_json(None) == (None, None)


def test_headers_are_in_neither_content_nor_derived_key():
    """The row -> message conversion on its own: the headers column goes to the
    headers only, so new headers (a new trace context) give the same message."""
    import datetime as dt

    from pyspark.sql import Row
    from pyspark.sql import types as T

    from pipeline.enqueue import _Preparer

    cols = ["ch", "n", "h"]
    prep = _Preparer(EnqueueSpec(channel_col="ch", headers_col="h"), cols, None)
    plain = _Preparer(EnqueueSpec(channel_col="ch"), ["ch", "n"], None)

    def row(h, n=1):
        return Row(ch="c", n=n, h=h, __lonnymq_channel="c")

    first = prep(row({"traceparent": TRACEPARENT, "at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)}))
    assert json.loads(first.content) == {"n": 1}
    assert json.loads(first.headers) == {"traceparent": TRACEPARENT, "at": "2026-01-02T03:04:05+00:00"}
    again = prep(row(Row(traceparent="00-other-01")))  # a struct (a Row) this time
    assert json.loads(again.headers) == {"traceparent": "00-other-01"}
    assert (again.key, again.content) == (first.key, first.content)
    assert prep(row(None)).headers is None and prep(row(None)).key == first.key
    # The key is the one of the row without its headers column: a job that adds
    # headers to a run that had none finds its messages.
    assert plain(Row(ch="c", n=1, __lonnymq_channel="c")).key == first.key
    assert prep(row(None, n=2)).key != first.key
    assert prep(row('{"b": 1}')).headers == '{"b": 1}'  # JSON text: as given
    assert prep(row("[]")) == "headers must be a JSON object, got a JSON array"

    # A key column does not change that; nor does content from one column.
    keyed = _Preparer(EnqueueSpec(channel="c", content_col="n", key_col="ch", headers_col="h"), cols, T.IntegerType())
    msg = keyed(Row(ch="k", n=5, h='{"a": 1}', __lonnymq_key="k"))
    assert (msg.content, msg.key, msg.headers) == (b"5", "k", '{"a": 1}')


def test_headers_spec_is_checked(spark, db):
    df = spark.createDataFrame([("c", 1, "{}")], "ch string, n int, h string")
    for spec, match in [
        (EnqueueSpec(channel="c", headers_col="missing"), "headers column 'missing' not in the input"),
        (EnqueueSpec(channel="c", headers_col="n"), "headers column 'n' is int: use a map, a struct or a string"),
        (EnqueueSpec(channel="c", content_col="h", headers_col="h"), "cannot be the channel or the content column"),
        (EnqueueSpec(channel_col="ch", headers_col="ch"), "cannot be the channel or the content column"),
    ]:
        with pytest.raises(PipelineError, match=match):
            enqueue(spark, df, db.dsn, spec)
    assert _messages(db) == []


def _delivered(db, channel: str) -> list[tuple]:
    """(content as JSON, headers) of every message of the channel, dequeued, by content's n."""
    conn = db.connect()
    rows = dequeue(conn, limit=100, channel=channel, columns="content, headers")
    return sorted(((json.loads(c), h) for c, h in rows), key=lambda r: r[0]["n"])


def test_enqueue_gives_headers_from_a_map_a_struct_or_a_json_string_column(spark, db):
    import datetime as dt

    utc = dt.timezone.utc
    map_rows = [(1, {"traceparent": TRACEPARENT, "tenant": "acme"}), (2, None), (3, {})]
    struct_rows = [(1, (TRACEPARENT, dt.datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=utc), 2.5, ["a", "b"])),
                   (2, None)]
    string_rows = [(1, '{"traceparent": "%s", "n": 1.50, "big": 1e3, "nested": {"k": [true, null]}}' % TRACEPARENT),
                   (2, None), (3, ' { "é" : "ü" } ')]
    cases = {
        "hmap": (map_rows, "n int, h map<string,string>"),
        "hstruct": (struct_rows, "n int, h struct<traceparent:string, sent:timestamp, w:double, tags:array<string>>"),
        "hstring": (string_rows, "n int, h string"),
    }
    for channel, (rows, schema) in cases.items():
        df = spark.createDataFrame(rows, schema)
        result = enqueue(spark, df, db.dsn, EnqueueSpec(channel=channel, headers_col="h", batch_size=2))
        assert (result.rows, result.bad_rows, result.messages, result.exit_code) == (len(rows), 0, len(rows), 0), \
            result.report()

    # The content is the row without its headers; the headers come with every delivery.
    assert _delivered(db, "hmap") == [({"n": 1}, {"traceparent": TRACEPARENT, "tenant": "acme"}),
                                      ({"n": 2}, None), ({"n": 3}, {})]
    assert _delivered(db, "hstruct") == [
        ({"n": 1}, {"traceparent": TRACEPARENT, "sent": "2026-03-04T05:06:07.890000+00:00", "w": 2.5,
                    "tags": ["a", "b"]}),
        ({"n": 2}, None)]
    hstring = _delivered(db, "hstring")
    assert hstring == [
        ({"n": 1}, {"traceparent": TRACEPARENT, "n": pytest.approx(1.5), "big": 1000, "nested": {"k": [True, None]}}),
        ({"n": 2}, None), ({"n": 3}, {"é": "ü"})]
    # JSON text is stored as jsonb reads it: numbers exactly as written.
    assert db.call("SELECT headers->>'n', headers->>'big' FROM lonnymq.message WHERE channel = 'hstring'"
                   " AND headers ? 'n'") == [("1.50", "1000")]

    # A re-run with other headers (a new trace context): nothing created twice,
    # and the messages keep the headers of their first write.
    before = db.call("SELECT id, headers::text FROM lonnymq.message ORDER BY id")
    rerun = [(1, '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'),
             (2, '{"new": true}'), (3, None)]
    result = enqueue(spark, spark.createDataFrame(rerun, "n int, h string"), db.dsn,
                     EnqueueSpec(channel="hstring", headers_col="h"))
    assert (result.rows, result.bad_rows, result.messages, result.exit_code) == (3, 0, 3, 0)
    assert db.call("SELECT id, headers::text FROM lonnymq.message ORDER BY id") == before


def test_bad_headers_are_bad_rows(spark, db, tmp_path):
    from lonnymq_dev.limits import MAX_HEADERS_BYTES

    # Compact, the last one is under the limit; as jsonb prints it, one byte over.
    over = json.dumps({"a": "x" * (MAX_HEADERS_BYTES - 24), "b": 1, "c": 2}, separators=(",", ":"))
    rows = [("h1", '{"traceparent": "%s"}' % TRACEPARENT), ("h2", None),
            ("h3", '["not", "an", "object"]'), ("h4", "{not json"), ("h5", over)]
    path = tmp_path / "in.parquet"
    spark.createDataFrame(rows, "id string, headers string").coalesce(1).write.parquet(str(path))

    proc = _cli("enqueue", str(path), "--channel", "hbad", "--key-col", "id", "--headers-col", "headers",
                "--dsn", db.dsn, "--master", "local[1]")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "bad rows: 3" in out and "nothing written" in out, out
    for reason in ("headers must be a JSON object, got a JSON array", "headers are not JSON: Expecting",
                   f"headers are {MAX_HEADERS_BYTES + 1} bytes of JSON text, the limit is {MAX_HEADERS_BYTES}"):
        assert reason in out, out
    assert _messages(db) == []

    result = enqueue(spark, spark.read.parquet(str(path)), db.dsn,
                     EnqueueSpec(channel="hbad", key_col="id", headers_col="headers"), skip_bad=True)
    assert (result.rows, result.bad_rows, result.messages, result.exit_code) == (5, 3, 2, 1)
    assert db.call("SELECT key, content, headers FROM lonnymq.message ORDER BY key") == [
        ("h1", b'{"id":"h1"}', {"traceparent": TRACEPARENT}), ("h2", b'{"id":"h2"}', None)]


# ------------------------------------------------------------------ export

# channel -> (max_attempts, {failures before success: number of messages}); 9 = always fails
PLAN = {
    "exp_a": (3, {0: 12, 1: 5, 2: 2, 9: 1}),
    "exp_b": (2, {0: 6, 1: 2, 9: 2}),
}


def _process(conn) -> None:
    """Deliver until nothing is ready: fail while attempt <= the message's 'fail', else complete."""
    while rows := dequeue(conn, limit=100, columns="id, num_attempts, content"):
        for mid, attempt, content in rows:
            if attempt <= json.loads(content)["fail"]:
                outcome = conn.execute("SELECT lonnymq.message_fail(%s, %s, %s)",
                                       (mid, attempt, f"error {attempt}")).fetchone()[0]
                assert outcome in ("retry", "dead")
            else:
                assert complete(conn, mid, attempt)


def _percentile(values: list[int], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def test_export_round_trips_counts_and_attempts(spark, db, tmp_path):
    from psycopg.types.json import Jsonb

    conn = db.connect()
    for ch, (max_attempts, plan) in PLAN.items():
        conn.execute("SELECT lonnymq.channel_set(%s, p_max_attempts => %s, p_backoff_base_ms => 0,"
                     " p_retain_history => true)", (ch, max_attempts))
        for fail, n in plan.items():
            for i in range(n):
                # Headers on every other message: kept in the history and the dead letters.
                headers = Jsonb({"traceparent": TRACEPARENT, "i": i}) if i % 2 == 0 else None
                conn.execute("SELECT lonnymq.message_create(%s, %s, p_key => %s, p_headers => %s)",
                             (ch, json.dumps({"fail": fail, "i": i}).encode(), f"{ch}-{fail}-{i}", headers))
    conn.execute("SELECT lonnymq.message_create('exp_nohist', '{\"fail\": 0}')")  # no retain_history
    _process(conn)
    conn.execute("SELECT lonnymq.message_create('exp_a', '{\"fail\": 0}')")  # still queued: not exported

    result = export(spark, db.dsn, tmp_path / "out")

    cols = "id, channel, key, content, state, num_attempts, created_at"
    hist_db = conn.execute(f"SELECT {cols}, completed_at, headers::text FROM lonnymq.message_history"
                           " ORDER BY id").fetchall()
    dead_db = conn.execute(f"SELECT {cols}, dead_at, last_error, attempt_log, headers::text FROM lonnymq.dead_letter"
                           " ORDER BY id").fetchall()
    # What the plan says: completed after fail+1 attempts, or dead after max_attempts.
    for ch, (max_attempts, plan) in PLAN.items():
        done = {f + 1: n for f, n in plan.items() if f + 1 <= max_attempts}
        dead = {max_attempts: sum(n for f, n in plan.items() if f + 1 > max_attempts)}
        assert Counter(r[5] for r in hist_db if r[1] == ch) == done
        assert Counter(r[5] for r in dead_db if r[1] == ch) == dead

    # The Parquet files hold exactly the tables' rows.
    hist_pq = sorted(tuple(bytes(v) if isinstance(v, bytearray) else v for v in r)
                     for r in spark.read.parquet(str(tmp_path / "out" / "history")).collect())
    assert hist_pq == [tuple(r) for r in hist_db]
    dead_pq = sorted(spark.read.parquet(str(tmp_path / "out" / "dead_letter")).collect())
    assert [(*(bytes(v) if isinstance(v, bytearray) else v for v in r[:-2]), json.loads(r[-2]), r[-1])
            for r in dead_pq] == [tuple(r) for r in dead_db]
    assert all(len(r[-2]) == r[5] for r in dead_db)  # one attempt_log entry per failed attempt
    # The headers, completed or dead: as given, as JSON text.
    for r in hist_db + dead_db:
        i = json.loads(r[3])["i"]
        assert (None if r[-1] is None else json.loads(r[-1])) == (
            {"traceparent": TRACEPARENT, "i": i} if i % 2 == 0 else None), r
    assert any(r[-1] is not None for r in dead_db) and any(r[-1] is None for r in dead_db)
    assert (result.history_rows, result.dead_letter_rows) == (len(hist_db), len(dead_db))

    # The summary agrees with the tables.
    by_channel = {s.channel: s for s in result.channels}
    assert sorted(by_channel) == sorted(PLAN)  # exp_nohist keeps no history
    for ch, s in by_channel.items():
        assert s.completed == sum(1 for r in hist_db if r[1] == ch)
        assert s.dead == sum(1 for r in dead_db if r[1] == ch)
        assert s.attempts_completed == dict(Counter(r[5] for r in hist_db if r[1] == ch))
        assert s.attempts_dead == dict(Counter(r[5] for r in dead_db if r[1] == ch))
        latencies = [r[7] - r[6] for r in hist_db if r[1] == ch]
        for q, got in ((0.5, s.latency_p50_ms), (0.95, s.latency_p95_ms), (0.99, s.latency_p99_ms)):
            assert got == pytest.approx(_percentile(latencies, q))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert {c["channel"]: (c["completed"], c["dead"]) for c in summary["channels"]} == {
        ch: (s.completed, s.dead) for ch, s in by_channel.items()}
    assert "exp_a" in result.table() and "TOTAL" in result.table()
    assert [p.name for p in result.charts] == ["attempts.png", "latency.png"]
    for chart in result.charts:
        data = chart.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_export_ranges_cover_every_id_once():
    for lo, hi, n in ((1, 1, 4), (1, 10, 3), (5, 1000, 7), (1, 3, 10)):
        ranges = _ranges(lo, hi, n)
        ids = [i for a, b in ranges for i in range(a, b + 1)]
        assert ids == list(range(lo, hi + 1)) and len(ranges) <= n


# Rows written straight into the tables, with the values a reader can get wrong:
# NULL against empty key and state, bytes that are not text, a channel with a
# quote, an error over two lines, unicode in the attempt log and the headers,
# NULL against empty headers.
_HISTORY_ROWS = [
    (10, "exp_q'uote", None, b"\x00\xff\xfe binary", None, 1, 1_000, 1_250,
     {"traceparent": TRACEPARENT, "tenant": "ä'\"\n"}),
    (20, "exp_q'uote", "", b"", b"", 2, 2_000, 2_100, {}),
    (30, "exp_plain", "k-30", "ünïcode".encode(), b"\x01state", 3, 3_000, 9_000, {"n": [1.5, None, True]}),
    *((i, "exp_plain", f"k-{i}", b"x" * (i % 7), None, 1 + i % 2, 10 * i, 10 * i + i % 13,
       {"i": i} if i % 20 == 0 else None) for i in range(40, 400, 10)),
]
_DEAD_ROWS = [
    (15, "exp_q'uote", "d-15", b"\x00dead", None, 3, 1_500, 1_900, "line 1\nline \"2\"",
     [{"attempt": 1, "at": 1_600, "error": "ü"}], {"traceparent": TRACEPARENT, "é": "😀"}),
    (25, "exp_plain", None, b"", b"s", 1, 2_500, 2_600, None, None, None),
]
_HISTORY_COLS = "id, channel, key, content, state, num_attempts, created_at, completed_at, headers"
_DEAD_COLS = "id, channel, key, content, state, num_attempts, created_at, dead_at, last_error, attempt_log, headers"


def _fill_export_tables(conn) -> None:
    from psycopg.types.json import Jsonb

    def jsonb(v):
        return None if v is None else Jsonb(v)

    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO lonnymq.message_history ({_HISTORY_COLS}) VALUES ({', '.join(['%s'] * 9)})",
                        [(*r[:-1], jsonb(r[-1])) for r in _HISTORY_ROWS])
        cur.executemany(f"INSERT INTO lonnymq.dead_letter ({_DEAD_COLS}) VALUES ({', '.join(['%s'] * 11)})",
                        [(*r[:-2], jsonb(r[-2]), jsonb(r[-1])) for r in _DEAD_ROWS])


def _parquet_rows(spark, path) -> list[tuple]:
    """The rows of a Parquet export, by id, bytes as bytes and attempt_log and headers parsed."""
    rows = []
    for r in spark.read.parquet(str(path)).orderBy("id").collect():
        values = {k: bytes(v) if isinstance(v, bytearray) else v for k, v in r.asDict().items()}
        for name in ("attempt_log", "headers"):
            if values.get(name) is not None:
                values[name] = json.loads(values[name])
        rows.append(tuple(values.values()))
    return rows


@pytest.mark.parametrize("transport", ["tcp", "socket"])
def test_export_round_trips_every_value_through_either_reader(spark, db, tmp_path, transport):
    """TCP: the JDBC reader (in the JVM); a Unix-domain socket: the Python reader."""
    import io

    from pipeline.common import Progress

    dsn = db.cluster.tcp_dsn(db.name) if transport == "tcp" else db.dsn
    conn = db.connect()
    _fill_export_tables(conn)
    log = io.StringIO()

    result = export(spark, dsn, tmp_path / "out", partitions=3, progress=Progress("export", log))

    assert ("through Python" in log.getvalue()) == (transport == "socket"), log.getvalue()
    assert _parquet_rows(spark, tmp_path / "out" / "history") == sorted(_HISTORY_ROWS)
    assert _parquet_rows(spark, tmp_path / "out" / "dead_letter") == sorted(_DEAD_ROWS)
    assert (result.history_rows, result.dead_letter_rows) == (len(_HISTORY_ROWS), len(_DEAD_ROWS))
    assert {s.channel: (s.completed, s.dead) for s in result.channels} == {"exp_plain": (37, 1), "exp_q'uote": (2, 1)}

    # One channel (its name quoted into the reading SQL).
    only = export(spark, dsn, tmp_path / "only", channels=["exp_q'uote"], charts=False,
                  progress=Progress("export", quiet=True))
    assert _parquet_rows(spark, tmp_path / "only" / "history") == [r for r in _HISTORY_ROWS if r[1] == "exp_q'uote"]
    assert _parquet_rows(spark, tmp_path / "only" / "dead_letter") == [r for r in _DEAD_ROWS if r[1] == "exp_q'uote"]
    assert [s.channel for s in only.channels] == ["exp_q'uote"] and only.charts == []


@pytest.mark.parametrize("transport", ["tcp", "socket"])
def test_export_reads_one_snapshot_while_the_tables_change(spark, db, tmp_path, monkeypatch, transport):
    """Rows added (inside and beyond the id range the export found) and removed
    after the snapshot was taken, before any task reads: the Parquet files hold
    the tables as they were at the snapshot."""
    import importlib

    from psycopg.types.json import Jsonb

    module = importlib.import_module("pipeline.export")
    dsn = db.cluster.tcp_dsn(db.name) if transport == "tcp" else db.dsn
    conn = db.connect()
    _fill_export_tables(conn)
    read_table = module._read_table
    changed = []

    def change_then_read(*args, **kwargs):
        if not changed:
            other = db.connect()  # autocommit: committed before the first task starts
            other.execute(f"INSERT INTO lonnymq.message_history ({_HISTORY_COLS}) VALUES"
                          " (11, 'exp_plain', 'new', 'n', NULL, 1, 1, 2, NULL),"  # inside the range
                          " (100000, 'exp_plain', 'new', 'n', NULL, 1, 1, 2, NULL)")  # beyond its end
            other.execute("DELETE FROM lonnymq.message_history WHERE id IN (10, 390)")
            other.execute(f"INSERT INTO lonnymq.dead_letter ({_DEAD_COLS}) VALUES"
                          " (16, 'exp_plain', NULL, 'n', NULL, 1, 1, 2, 'new', %s, NULL)", [Jsonb([])])
            other.execute("DELETE FROM lonnymq.dead_letter WHERE id = 25")
            changed.append(True)
        return read_table(*args, **kwargs)

    monkeypatch.setattr(module, "_read_table", change_then_read)
    result = export(spark, dsn, tmp_path / "out", partitions=3, charts=False)

    assert changed
    assert _parquet_rows(spark, tmp_path / "out" / "history") == sorted(_HISTORY_ROWS)
    assert _parquet_rows(spark, tmp_path / "out" / "dead_letter") == sorted(_DEAD_ROWS)
    assert (result.history_rows, result.dead_letter_rows) == (len(_HISTORY_ROWS), len(_DEAD_ROWS))
    assert db.call("SELECT count(*) FROM lonnymq.message_history")[0][0] == len(_HISTORY_ROWS)  # +2 -2
    assert db.call("SELECT count(*) FROM lonnymq.message_history WHERE id IN (11, 100000)")[0][0] == 2


def test_export_fails_rather_than_read_outside_the_snapshot(spark, db, tmp_path, monkeypatch):
    """Were Spark to leave a task's JDBC connection in autocommit mode (it does with
    fetchsize 0), the imported snapshot would last for the first statement only:
    the read must fail then, not go on in a newer snapshot."""
    import importlib

    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    _fill_export_tables(db.connect())
    monkeypatch.setattr(importlib.import_module("pipeline.export"), "FETCH_ROWS", 0)
    with pytest.raises((Py4JJavaError, PySparkException), match="SAVEPOINT can only be used in transaction blocks"):
        export(spark, db.cluster.tcp_dsn(db.name), tmp_path / "out", charts=False)


def test_export_jdbc_settings(db, tmp_path, monkeypatch):
    """Where the JDBC jar is found, and the connection the JDBC reader gets."""
    import psycopg

    from pipeline.export import JDBC_JAR_ENV, jdbc_jar, jdbc_options

    monkeypatch.setenv(JDBC_JAR_ENV, str(tmp_path / "missing.jar"))
    with pytest.raises(PipelineError, match=f"libpostgresql-jdbc-java.*{JDBC_JAR_ENV}"):
        jdbc_jar()
    (tmp_path / "driver.jar").write_bytes(b"PK")
    monkeypatch.setenv(JDBC_JAR_ENV, str(tmp_path / "driver.jar"))
    assert jdbc_jar() == tmp_path / "driver.jar"

    with psycopg.connect(db.dsn) as conn:
        assert jdbc_options(conn.info, db.dsn) is None  # a Unix-domain socket
    dsn = db.cluster.tcp_dsn(db.name, password="s3cret", sslmode="disable", connect_timeout=7,
                             options="-c work_mem=8MB")
    with psycopg.connect(dsn) as conn:
        options = jdbc_options(conn.info, dsn)
    assert options == {
        "url": f"jdbc:postgresql://127.0.0.1:{db.cluster.port}/{db.name}",
        "driver": "org.postgresql.Driver",
        "user": db.cluster.superuser,
        "ApplicationName": "lonnymq-pipeline export",
        "password": "s3cret",
        "sslmode": "disable",
        "connectTimeout": "7",
        "options": "-c work_mem=8MB",
    }


def test_export_cli_without_the_jdbc_driver_is_a_usage_error(db, tmp_path, monkeypatch):
    monkeypatch.setenv("LONNYMQ_JDBC_JAR", str(tmp_path / "missing.jar"))
    proc = _cli("export", "--dsn", db.cluster.tcp_dsn(db.name), "--out", str(tmp_path / "out"), "--master", "local[1]")
    assert proc.returncode == 2, proc.stderr
    assert "the PostgreSQL JDBC driver is needed" in proc.stderr and "LONNYMQ_JDBC_JAR" in proc.stderr
    assert not (tmp_path / "out" / "history").exists()


# ------------------------------------------------------------------ loadgen


def test_loadgen_completes_every_message_it_created(spark, db):
    cfg = LoadgenConfig(producers=1, consumers=1, channels=2, duration_s=2.0, produce_batch=5,
                        dequeue_batch=3, drain_timeout_s=60)
    result = run_loadgen(spark, db.dsn, cfg)

    assert result["created"] > 0
    assert result["completed"] == result["created"]
    assert result["remaining"] == 0 and result["all_completed"]
    per_second = result["per_second"]
    assert [r["second"] for r in per_second] == list(range(len(per_second)))
    assert len([r for r in per_second if r["phase"] == "run"]) == 2
    assert sum(r["produced"] for r in per_second) == result["created"]
    assert sum(r["completed"] for r in per_second) == result["completed"]
    assert db.call("SELECT count(*) FROM lonnymq.message")[0][0] == 0
    # The run's channels are dropped afterwards.
    assert db.call("SELECT count(*) FROM lonnymq.channel WHERE name = ANY(%s)", (result["channels"],))[0][0] == 0

    with pytest.raises(PipelineError, match="concurrent Spark tasks"):
        run_loadgen(spark, db.dsn, LoadgenConfig(producers=2, consumers=1, duration_s=1))
