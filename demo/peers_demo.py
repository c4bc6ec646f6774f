"""What users of other queues expect, shown and checked (0.12.0): per-tenant
channels configured once by a name pattern, strict FIFO per tenant (ordered
channels), topics (fan-out in the caller's transaction), and the metrics
for Prometheus.

Called by demo/demo.py on its database; returns (ok, claim) pairs.
"""

from __future__ import annotations

import time

import psycopg

from lonnymq_dev.calls import metric_samples


def _say(text: str) -> None:
    print(text, flush=True)


def _take(conn: psycopg.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT channel, convert_from(content, 'UTF8'), id, num_attempts "
        "FROM lonnymq.message_dequeue(60000, 10) ORDER BY channel").fetchall()


def ordered_tenants(conn: psycopg.Connection) -> list[tuple[bool, str]]:
    checks = []
    _say("\n== Per-tenant ordered channels, configured once: channel_set('tenant-*', p_ordered => true)")
    conn.execute("SELECT lonnymq.channel_set('tenant-*', p_ordered => true, p_max_attempts => 5, "
                 "p_backoff_base_ms => 300, p_backoff_jitter => 0)")
    for channel, text in (("tenant-acme", "acme-1"), ("tenant-acme", "acme-2"), ("tenant-bolt", "bolt-1")):
        conn.execute("SELECT lonnymq.message_create(%s, %s)", (channel, text.encode()))
    _say("  created acme-1, acme-2 in tenant-acme and bolt-1 in tenant-bolt; no channel_set per tenant")
    first = _take(conn)
    _say(f"  dequeue: {', '.join(m for _, m, _, _ in first)}  (one at a time per tenant)")
    checks.append(([m for _, m, _, _ in first] == ["acme-1", "bolt-1"],
                   "a pattern made each tenant's channel ordered: one message per tenant at a time"))
    acme = next(r for r in first if r[1] == "acme-1")
    bolt = next(r for r in first if r[1] == "bolt-1")
    conn.execute("SELECT lonnymq.message_complete(%s, %s)", bolt[2:])
    conn.execute("SELECT lonnymq.message_fail(%s, %s, 'payment gateway timeout')", acme[2:])
    _say("  acme-1 fails (retry in 300 ms): it keeps its place")
    blocked = _take(conn)
    checks.append((blocked == [], "acme-2 was not delivered while acme-1 waited for its retry"))
    deadline = time.monotonic() + 5
    again = []
    while not again and time.monotonic() < deadline:
        time.sleep(0.05)
        again = _take(conn)
    _say(f"  then: {', '.join(m for _, m, _, _ in again)} again (attempt {again[0][3] if again else '-'})")
    checks.append(([m for _, m, _, _ in again] == ["acme-1"], "the failed head came back before anything behind it"))
    for row in again:
        conn.execute("SELECT lonnymq.message_complete(%s, %s)", row[2:])
    last = _take(conn)
    for row in last:
        conn.execute("SELECT lonnymq.message_complete(%s, %s)", row[2:])
    checks.append(([m for _, m, _, _ in last] == ["acme-2"], "acme-2 followed, in order"))
    rows = conn.execute("SELECT count(*) FROM lonnymq.channel WHERE pattern IS NOT NULL").fetchone()[0]
    _say(f"  channel rows left for the drained tenants: {rows} (the pattern is one row)")
    checks.append((rows == 0, "drained tenants under the pattern left no channel rows"))
    return checks


def topics(conn: psycopg.Connection) -> list[tuple[bool, str]]:
    checks = []
    _say("\n== Topics: topic_bind(pattern, channel), message_publish(routing_key, ...)")
    for pattern, channel in (("order.*", "mailer"), ("order.#", "audit"), ("#.paid", "billing")):
        conn.execute("SELECT lonnymq.topic_bind(%s, %s)", (pattern, channel))
        _say(f"  bound {pattern!r:>10} -> {channel}")
    routes = [r[0] for r in conn.execute("SELECT lonnymq.topic_routes('order.paid')")]
    _say(f"  topic_routes('order.paid'): {', '.join(routes)}")
    conn.execute("BEGIN")
    conn.execute("SELECT lonnymq.message_publish('order.paid', '{\"order\": 7}')")
    conn.execute("ROLLBACK")
    after_rollback = conn.execute("SELECT count(*) FROM lonnymq.message WHERE channel = ANY(%s)",
                                  (routes,)).fetchone()[0]
    _say(f"  a publish in a rolled-back business transaction left {after_rollback} messages")
    with conn.transaction():
        n = conn.execute("SELECT lonnymq.message_publish('order.paid', '{\"order\": 7}')").fetchone()[0]
    copies = conn.execute("SELECT channel FROM lonnymq.message WHERE channel = ANY(%s) ORDER BY channel",
                          (routes,)).fetchall()
    _say(f"  committed: one message in each of {n} channels: {', '.join(c for c, in copies)}")
    checks.append((routes == ["audit", "billing", "mailer"], "order.paid routes to audit, billing and mailer"))
    checks.append((after_rollback == 0, "a rolled-back publish left no copy"))
    checks.append((n == 3 and [c for c, in copies] == routes, "a committed publish left one copy per channel"))
    return checks


def metrics(conn: psycopg.Connection) -> list[tuple[bool, str]]:
    _say("\n== Metrics for Prometheus: lonnymq.metrics_text() (what the exporters in monitoring/ serve)")
    text = conn.execute("SELECT lonnymq.metrics_text()").fetchone()[0]
    for line in text.splitlines():
        # (The series of the pattern, and the others when not zero.)
        if not line.startswith("#") and (" 0" != line[-2:] or "_total" in line or "tenant-*" in line):
            _say(f"  {line}")
    samples = metric_samples(text)
    created = samples.get(("lonnymq_messages_created_total", None, None), 0)
    completed = samples.get(("lonnymq_messages_completed_total", None, None), 0)
    tenant_series = [k for k in samples if k[0] == "lonnymq_messages" and k[1] == "tenant-*"]
    return [
        (created > 0 and completed > 0, f"counters: {created:.0f} created, {completed:.0f} completed"),
        (len(tenant_series) == 3, "one series for every tenant channel under tenant-* (ready, scheduled, locked)"),
    ]


def run_peers_demo(dsn: str) -> list[tuple[bool, str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return ordered_tenants(conn) + topics(conn) + metrics(conn)
