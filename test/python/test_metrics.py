"""Metrics for Prometheus (0.12.0): the view lonnymq.metrics, metrics_text(),
and the exporter configurations shipped in monitoring/.

- The counters follow the events a known workload makes (an expired lock, a
  failure to the dead letters included).
- metrics_text() parses as Prometheus' text format (prometheus_client's
  parser), label values escaped.
- Reads are bounded per channel: ten times the messages in the same
  channels read no more buffers.
- Debian's prometheus-postgres-exporter, started with
  monitoring/postgres_exporter/lonnymq.yaml against the test cluster on
  loopback as a role given the monitor set, serves the series with the
  workload's values.
- The shipped files name the metrics and help texts that metrics_text()
  writes.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lonnymq_dev.calls import index_entries_read, metric_samples

ROOT = pathlib.Path(__file__).resolve().parents[2]
POSTGRES_EXPORTER_FILE = ROOT / "monitoring" / "postgres_exporter" / "lonnymq.yaml"
SQL_EXPORTER_FILE = ROOT / "monitoring" / "sql_exporter" / "lonnymq.collector.yml"
EXPORTER = shutil.which("prometheus-postgres-exporter") or "/usr/bin/prometheus-postgres-exporter"


def read_metrics(conn) -> dict[tuple, float]:
    rows = conn.execute("SELECT metric, channel, state, value FROM lonnymq.metrics").fetchall()
    return {(m, c, s): v for m, c, s, v in rows}


def families(conn) -> list[tuple[str, str, str]]:
    return conn.execute("SELECT metric, type, help FROM lonnymq._metric_families() ORDER BY i").fetchall()


def test_counters_follow_the_workload(db):
    conn = db.connect()
    before = read_metrics(conn)

    def delta(name: str) -> float:
        return read_metrics(conn)[(name, None, None)] - before[(name, None, None)]

    conn.execute("SELECT lonnymq.channel_set('c', p_max_attempts => 2)")
    conn.execute("SELECT lonnymq.message_create('c', 'a')")
    conn.execute("SELECT * FROM lonnymq.message_create_batch('c', ARRAY['b', 'c']::bytea[])")
    # A lock of 1 ms lapses; the next dequeue recovers the message and
    # delivers it again (a lapsed lock: one failed delivery).
    (lapsed,) = conn.execute("SELECT id FROM lonnymq.message_dequeue(1, 1)").fetchone()
    time.sleep(0.05)
    taken = conn.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(30000, 3)").fetchall()
    assert lapsed in [t[0] for t in taken]
    again = next(t for t in taken if t[0] == lapsed)
    other = next(t for t in taken if t[0] != lapsed)
    assert conn.execute("SELECT lonnymq.message_complete(%s, %s)", other).fetchone()[0]
    # Its second failure reaches max_attempts: a dead letter.
    assert conn.execute("SELECT lonnymq.message_fail(%s, %s, 'boom')", again).fetchone()[0] == "dead"
    # A stale token changes nothing, and counts nothing.
    assert conn.execute("SELECT lonnymq.message_complete(%s, %s)", (other[0], other[1])).fetchone()[0] is False

    assert {
        name: delta(name)
        for name in (
            "lonnymq_messages_created_total", "lonnymq_messages_delivered_total",
            "lonnymq_messages_completed_total", "lonnymq_messages_failed_total",
            "lonnymq_messages_dead_lettered_total", "lonnymq_messages_lock_expired_total",
        )
    } == {
        "lonnymq_messages_created_total": 3,
        "lonnymq_messages_delivered_total": 1 + len(taken),
        "lonnymq_messages_completed_total": 1,
        "lonnymq_messages_failed_total": 1,
        "lonnymq_messages_dead_lettered_total": 1,
        "lonnymq_messages_lock_expired_total": 1,
    }
    now = read_metrics(conn)
    assert now[("lonnymq_messages", "c", "locked")] == len(taken) - 2
    assert now[("lonnymq_dead_letters", "c", None)] == 1


def test_text_format_parses(db):
    conn = db.connect()
    odd = 'q"uote\\back\nline é'
    conn.execute("SELECT lonnymq.channel_set(%s)", (odd,))
    conn.execute("SELECT lonnymq.channel_set('t-*', p_max_concurrency => 3)")
    conn.execute("SELECT lonnymq.message_create(%s, 'x')", (odd,))
    for tenant in range(4):
        conn.execute("SELECT lonnymq.message_create(%s, 'x')", (f"t-{tenant}",))
    conn.execute("SELECT lonnymq.message_create('free', 'x', 9e15::bigint)")
    text = conn.execute("SELECT lonnymq.metrics_text()").fetchone()[0]

    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    # prometheus_client names a counter's family without its _total.
    assert [(n if t != "counter" else n.removesuffix("_total"), t) for n, t, _ in families(conn)] == [
        (name, f.type) for name, f in parsed.items()
    ]
    samples = metric_samples(text)
    assert samples[("lonnymq_messages", odd, "ready")] == 1
    assert samples[("lonnymq_messages", "t-*", "ready")] == 4  # one series for the four followers
    assert samples[("lonnymq_messages", "*", "scheduled")] == 1
    assert samples[("lonnymq_messages_created_total", None, None)] >= 6
    # The view and the text say the same.
    assert {k: v for k, v in read_metrics(conn).items() if k[0] != "lonnymq_oldest_ready_age_seconds"} == {
        k: v for k, v in samples.items() if k[0] != "lonnymq_oldest_ready_age_seconds"
    }


def _scrape_reads(conn, view: str = "lonnymq.metrics") -> int:
    """Index entries one read of the view returned, over every index of
    lonnymq's tables."""
    return index_entries_read(conn, f"SELECT * FROM {view}")


@pytest.mark.parametrize("pattern", [None, "b-*"])
def test_reads_are_bounded_per_channel(db, pattern):
    """Ten times the messages in the same 1,000 channels read no more index
    entries: the counts stop at the count limit, and the rest is a few
    probes per channel.  (The view channel_stats reads every message.)"""
    conn = db.connect()
    if pattern:
        conn.execute("SELECT lonnymq.channel_set(%s, p_max_attempts => 5)", (pattern,))
    channels = 1000
    conn.execute("SET lonnymq.metrics_count_limit = 1000")

    def fill(per_channel: int) -> None:
        conn.execute(
            "SELECT count(*) FROM generate_series(1, %s) AS g, "
            "LATERAL lonnymq.message_create_batch('b-' || g, array_fill('x'::bytea, ARRAY[%s]))",
            (channels, per_channel),
        )

    fill(5)
    small = _scrape_reads(conn)
    fill(45)
    assert conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0] == 50 * channels
    large = _scrape_reads(conn)
    series = pattern or "*"
    counted = read_metrics(conn)
    assert counted[("lonnymq_messages", series, "ready")] == 1000, "the series' count stops at the limit"
    assert counted[("lonnymq_messages_count_limit", None, None)] == 1000
    every = _scrape_reads(conn, "lonnymq.channel_stats")
    print(f"index entries read: metrics {small} at 5 messages a channel, {large} at 50; channel_stats {every} at 50")
    assert every >= 50 * channels, "channel_stats reads every message (the reference)"
    # A few entries a channel (the next channel, its name, its first ready
    # message) and the count limit: not fifty messages' worth, and no more
    # with ten times the messages.
    assert large <= 5 * channels + 1000
    assert large == small


@pytest.fixture
def monitor_role(db):
    """A LOGIN role given the monitor access set, dropped after the test."""
    conn = db.connect()
    role = f"lmq_monitor_{db.name}"[:63]
    conn.execute(f'CREATE ROLE "{role}" LOGIN')
    conn.execute("SELECT lonnymq.grant_access(%s, 'monitor')", (role,))
    yield role
    conn.execute("SELECT lonnymq.revoke_access(%s, 'monitor')", (role,))
    conn.execute(f'DROP OWNED BY "{role}"')
    conn.execute(f'DROP ROLE "{role}"')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not os.path.exists(EXPORTER), reason="prometheus-postgres-exporter is not installed (make deps)")
def test_postgres_exporter_scrapes_the_shipped_queries(db, cluster, tmp_path, monitor_role):
    conn = db.connect()
    # A known workload in a database of its own (counters start at 0).
    conn.execute("SELECT lonnymq.channel_set('orders', p_max_attempts => 1)")
    conn.execute("SELECT lonnymq.channel_set('tenant-*', p_max_concurrency => 2)")
    conn.execute("SELECT * FROM lonnymq.message_create_batch('orders', ARRAY['a', 'b', 'c']::bytea[])")
    conn.execute("SELECT lonnymq.message_create('tenant-9', 'x', 9e15::bigint)")
    taken = conn.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 2)").fetchall()
    conn.execute("SELECT lonnymq.message_complete(%s, %s)", taken[0])
    conn.execute("SELECT lonnymq.message_fail(%s, %s)", taken[1])

    port = _free_port()
    env = dict(os.environ)
    env["DATA_SOURCE_NAME"] = (
        f"postgresql://{monitor_role}@127.0.0.1:{cluster.port}/{db.name}?sslmode=disable"
    )
    log = tmp_path / "exporter.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                EXPORTER,
                f"--extend.query-path={POSTGRES_EXPORTER_FILE}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--disable-default-metrics",
                "--disable-settings-metrics",
            ],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        body = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    body = r.read().decode()
                if "lonnymq_messages" in body:
                    break
            except OSError:
                pass
            time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "lonnymq_messages" in body, log.read_text()[-3000:]
    samples = metric_samples(body)
    assert samples[("lonnymq_messages", "orders", "ready")] == 1
    assert samples[("lonnymq_messages", "orders", "locked")] == 0
    assert samples[("lonnymq_dead_letters", "orders", None)] == 1
    assert samples[("lonnymq_messages", "tenant-*", "scheduled")] == 1
    assert samples[("lonnymq_messages", "*", "ready")] == 0
    assert samples[("lonnymq_messages_created_total", None, None)] == 4
    assert samples[("lonnymq_messages_delivered_total", None, None)] == 2
    assert samples[("lonnymq_messages_completed_total", None, None)] == 1
    assert samples[("lonnymq_messages_failed_total", None, None)] == 1
    assert samples[("lonnymq_messages_dead_lettered_total", None, None)] == 1
    assert samples[("lonnymq_messages_lock_expired_total", None, None)] == 0
    assert samples[("lonnymq_messages_count_limit", None, None)] == 10000
    assert ("lonnymq_oldest_ready_age_seconds", "orders", None) in samples


def test_shipped_configurations_match_the_metrics(db, monitor_role):
    conn = db.connect()
    expected = {(name, kind, text) for name, kind, text in families(conn)}

    found = set()
    for key, query in yaml.safe_load(POSTGRES_EXPORTER_FILE.read_text()).items():
        for column in query["metrics"]:
            ((name, spec),) = column.items()
            if spec["usage"] in ("GAUGE", "COUNTER"):
                found.add((f"{key}_{name}", spec["usage"].lower(), spec["description"]))
    assert found == expected, "monitoring/postgres_exporter/lonnymq.yaml"

    collector = yaml.safe_load(SQL_EXPORTER_FILE.read_text())
    assert collector["collector_name"] == "lonnymq"
    assert {(m["metric_name"], m["type"], m["help"]) for m in collector["metrics"]} == expected
    # Every query of both files runs, as the monitor set, and returns the
    # columns the files name.
    queries = [q["query"] for q in yaml.safe_load(POSTGRES_EXPORTER_FILE.read_text()).values()]
    queries += [q["query"] for q in collector.get("queries", [])] + [
        m["query"] for m in collector["metrics"] if "query" in m
    ]
    with conn.transaction():
        conn.execute(f'SET LOCAL ROLE "{monitor_role}"')
        for query in queries:
            cur = conn.execute(query)
            assert cur.description, query
