"""The lonnymq calls that the tests, benchmarks and demos make again and
again, written once: a dequeue, a complete, a complete-and-dequeue, and
the small reads around them.

Each takes a psycopg 3 connection (or cursor) and returns plain rows.  A
delivery is ``(id, num_attempts)`` unless ``columns`` names other columns of
message_dequeue's result.  Tests whose subject is the SQL text itself (odd
arguments and their SQLSTATEs, EXPLAIN of a statement, statements matched by
pg_stat_statements) keep their literal SQL.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from lonnymq_dev.limits import LOCK_MS

DELIVERY = "id, num_attempts"


def scalar(conn, sql: str, params: Sequence = ()):
    """The first column of the first row of one statement."""
    return conn.execute(sql, params).fetchone()[0]


def now_ms(conn) -> int:
    """The server's clock in epoch ms, as lonnymq reads it."""
    return scalar(conn, "SELECT lonnymq.to_epoch(clock_timestamp())")


def dequeue(conn, lock_ms: int = LOCK_MS, limit: int = 1, channel: str | None = None,
            columns: str = DELIVERY) -> list[tuple]:
    """message_dequeue(lock_ms, limit, channel): the deliveries, in order."""
    return conn.execute(f"SELECT {columns} FROM lonnymq.message_dequeue(%s, %s, %s)",
                        (lock_ms, limit, channel)).fetchall()


def dequeue_one(conn, lock_ms: int = LOCK_MS, channel: str | None = None,
                columns: str = DELIVERY) -> tuple | None:
    """One delivery (message_dequeue with limit 1), or None."""
    rows = dequeue(conn, lock_ms, 1, channel, columns)
    return rows[0] if rows else None


def complete(conn, message_id: int, num_attempts: int) -> bool:
    """message_complete: True when the delivery was still current."""
    return scalar(conn, "SELECT lonnymq.message_complete(%s, %s)", (message_id, num_attempts))


def complete_batch(conn, deliveries: Iterable[Sequence]) -> int:
    """message_complete_batch of (id, num_attempts, ...) deliveries: how many it completed."""
    deliveries = list(deliveries)
    return scalar(conn, "SELECT lonnymq.message_complete_batch(%s::bigint[], %s::integer[])",
                  ([d[0] for d in deliveries], [d[1] for d in deliveries]))


def complete_dequeue(conn, deliveries: Iterable[Sequence] | None, lock_ms: int = LOCK_MS, limit: int = 1,
                     channel: str | None = None, columns: str = DELIVERY) -> list[tuple]:
    """message_complete_dequeue: complete the (id, num_attempts, ...) deliveries
    (None: NULL arrays, nothing to complete) and dequeue up to limit, in one call."""
    ids = tokens = None
    if deliveries is not None:
        deliveries = list(deliveries)
        ids, tokens = [d[0] for d in deliveries], [d[1] for d in deliveries]
    return conn.execute(
        f"SELECT {columns} FROM lonnymq.message_complete_dequeue(%s::bigint[], %s::integer[], %s, %s, %s)",
        (ids, tokens, lock_ms, limit, channel)).fetchall()


# Index entries returned by every index of lonnymq's tables, so far in this
# transaction: read it before and after a statement, in one transaction,
# for what the statement read (whatever the depth of the indexes).
INDEX_ENTRIES_READ = (
    "SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0)::bigint FROM pg_index AS i "
    "JOIN pg_class AS c ON c.oid = i.indrelid WHERE c.relnamespace = 'lonnymq'::regnamespace"
)


def index_entries_read(conn, sql: str, params: Sequence = ()) -> int:
    """Index entries of lonnymq's tables that one statement read (its own
    transaction, INDEX_ENTRIES_READ before and after)."""
    with conn.transaction():
        before = scalar(conn, INDEX_ENTRIES_READ)
        conn.execute(sql, params).fetchall()
        return scalar(conn, INDEX_ENTRIES_READ) - before


def metric_samples(text: str) -> dict[tuple, float]:
    """Prometheus' text format (metrics_text(), an exporter's /metrics), read
    by prometheus_client's parser: {(name, channel, state): value}, the
    labels None where a series has none."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, s.labels.get("channel"), s.labels.get("state")): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}
