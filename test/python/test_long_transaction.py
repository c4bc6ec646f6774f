"""A long-open transaction elsewhere (DESIGN lesson 9).

One session opens a REPEATABLE READ transaction, takes its snapshot and holds
it: vacuum, page pruning and index entry killing can then remove nothing that
died after it. Meanwhile the queue churns: a producer keeps a backlog, a few
workers dequeue and complete. The same load runs first in a fresh database
with no such transaction (the baseline), then in another fresh database with
it held.

Asserted (correctness only, never timing): every message is delivered once
(first attempt, not recovered) and completed once; dequeue keeps working; a
single consumer draining a committed backlog never gets an empty dequeue while
ready messages remain.

Printed (run with -s): throughput per window of WINDOW completions with and
without the held transaction, the slowdown ratios (held / baseline, last
window / first window), index entries read per dequeue call (from
pg_stat_get_xact_tuples_returned, measured on probe calls), the single
consumer's time per dequeue + complete, and dead tuples and sizes of the
lonnymq tables at the end.

Both runs VACUUM the lonnymq tables at every window boundary, standing in for
autovacuum (whose default naptime of one minute exceeds a run): in the
baseline it removes the dead rows, under the held snapshot it cannot.
"""

from __future__ import annotations

import statistics
import threading
import time

import psycopg

from lonnymq_dev.calls import dequeue, dequeue_one, complete
from lonnymq_dev.threads import guarded

TOTAL = 4_000           # messages churned per run
WINDOW = 800            # throughput measured per this many completions
WORKERS = 4
CHANNELS = 4
BACKLOG = 800           # the producer keeps about this many messages waiting
DRAIN = 200             # the single-consumer phase
PROBE_EVERY = 20        # worker 0 measures index entries read on every n-th call
WINDOW_TIMEOUT_S = 60   # a window that takes longer than this means dequeue stalled

# index entries read by this transaction so far, per lonnymq index
STATS_SQL = """
SELECT i.indexrelname, pg_stat_get_xact_tuples_returned(i.indexrelid)
FROM pg_stat_user_indexes AS i
WHERE i.schemaname = 'lonnymq'
"""


def _connect(dsn: str, autocommit: bool = True) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=autocommit)
    if autocommit:
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET lock_timeout = '30s'")
    return conn


class Churn:
    def __init__(self, dsn: str, label: str):
        self.dsn = dsn
        self.label = label
        self.lock = threading.Lock()
        self.created: list[int] = []
        self.delivered: list[tuple[int, int, bool]] = []   # id, num_attempts, is_recovered
        self.completed: list[int] = []
        self.completed_at: list[float] = []               # time.monotonic() of each completion
        self.refused: list[int] = []
        self.empties = 0
        self.empty_ready: list[tuple[int, int]] = []      # (completed so far, unlocked ready messages)
        self.calls = 0
        self.call_times: list[tuple[int, float]] = []     # (completed so far, seconds for dequeue + complete)
        self.probes: list[tuple[int, int, dict]] = []      # (completed so far, index entries read, per index)
        self.errors: list[str] = []
        self.done = threading.Event()

    def _guard(self, fn, *args):
        guarded(fn, args, self.errors, self.lock, self.done)

    def producer(self) -> None:
        with _connect(self.dsn) as conn:
            made = 0
            while made < TOTAL and not self.done.is_set():
                with self.lock:
                    waiting = len(self.created) - len(self.completed)
                if waiting > BACKLOG:
                    time.sleep(0.002)
                    continue
                n = min(100, TOTAL - made)
                rows = conn.execute(
                    "SELECT lonnymq.message_create('lt_' || (g %% %s), convert_to(g::text, 'UTF8'))"
                    " FROM generate_series(%s::integer, %s::integer) AS g",
                    (CHANNELS, made, made + n - 1),
                ).fetchall()
                with self.lock:
                    self.created.extend(r[0] for r in rows)
                made += n

    def worker(self, n: int) -> None:
        with _connect(self.dsn) as conn:
            calls = 0
            while not self.done.is_set():
                with self.lock:
                    if len(self.completed) >= TOTAL:
                        return
                calls += 1
                began = time.perf_counter()
                if n == 0 and calls % PROBE_EVERY == 0:
                    # pending statistics are flushed only between transactions: the
                    # difference inside one transaction is exactly this call's reads
                    with conn.transaction():
                        before = dict(conn.execute(STATS_SQL).fetchall())
                        row = dequeue_one(conn, columns="id, num_attempts, is_recovered")
                        after = dict(conn.execute(STATS_SQL).fetchall())
                    per_index = {k: v - before.get(k, 0) for k, v in after.items()}
                    if row is not None:
                        with self.lock:
                            self.probes.append((len(self.completed), sum(per_index.values()), per_index))
                else:
                    row = dequeue_one(conn, columns="id, num_attempts, is_recovered")
                if row is None:
                    # how many ready messages nobody held when it came back empty
                    ready = conn.execute(
                        "SELECT count(*) FROM lonnymq.message WHERE NOT is_locked"
                        " AND dequeue_at <= lonnymq.to_epoch(clock_timestamp())").fetchone()[0]
                    with self.lock:
                        self.calls += 1
                        self.empties += 1
                        self.empty_ready.append((len(self.completed), ready))
                    time.sleep(0.001)
                    continue
                ok = complete(conn, *row[:2])
                spent = time.perf_counter() - began
                with self.lock:
                    self.calls += 1
                    self.delivered.append(row)
                    if ok:
                        self.completed.append(row[0])
                        self.completed_at.append(time.monotonic())
                    else:
                        self.refused.append(row[0])
                    self.call_times.append((len(self.completed), spent))

    def run(self) -> dict:
        monitor = _connect(self.dsn)
        threads = [threading.Thread(target=self._guard, args=(self.producer,))]
        threads += [threading.Thread(target=self._guard, args=(self.worker, i)) for i in range(WORKERS)]
        began = time.monotonic()
        for t in threads:
            t.start()
        boundaries = [began]
        next_mark = WINDOW
        while not self.done.is_set():
            time.sleep(0.005)
            with self.lock:
                count = len(self.completed)
            if count >= next_mark:
                # (completions may have crossed several marks since the last
                # look; the windows are timed from completed_at below)
                boundaries.append(time.monotonic())
                while next_mark <= count:
                    next_mark += WINDOW
                monitor.execute("VACUUM lonnymq.message, lonnymq.channel")
                if count >= TOTAL:
                    break
            elif time.monotonic() - boundaries[-1] > WINDOW_TIMEOUT_S:
                with self.lock:
                    self.errors.append(f"{self.label}: no {WINDOW} completions within {WINDOW_TIMEOUT_S} s "
                                       f"(at {count}): dequeue stalled")
                break
        self.done.set()
        for t in threads:
            t.join(60)
        elapsed = time.monotonic() - began

        # A single consumer drains a committed backlog: no empty dequeue while
        # ready messages remain.
        drain_ids = [r[0] for r in monitor.execute(
            "SELECT lonnymq.message_create('lt_' || (g %% %s), convert_to(g::text, 'UTF8'))"
            " FROM generate_series(1, %s::integer) AS g", (CHANNELS, DRAIN)).fetchall()]
        single_empty = []
        drained = []
        with _connect(self.dsn) as conn:
            t0 = time.perf_counter()
            for i in range(DRAIN):
                row = dequeue_one(conn, columns="id, num_attempts, is_recovered")
                if row is None:
                    single_empty.append(i)
                    continue
                drained.append(row)
                assert complete(conn, *row[:2]) is True
            single_s = time.perf_counter() - t0
            after = dequeue(conn, columns="*")
        # the closed connections flush their statistics as they exit
        for _ in range(50):
            monitor.execute("SELECT pg_stat_clear_snapshot()")
            dead = monitor.execute(
                "SELECT relname, n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = 'lonnymq'"
                " AND relname IN ('message', 'channel', 'channel_quota') ORDER BY relname"
            ).fetchall()
            if dict((r[0], r[1]) for r in dead).get("message") == 0:
                break
            time.sleep(0.1)
        sizes = monitor.execute(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class AS c"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'lonnymq' AND c.relname IN ('message', 'message_pkey', 'message_channel_ix',"
            " 'message_ready_ix', 'message_due_ix') ORDER BY c.relname").fetchall()
        left = monitor.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0]
        monitor.close()

        marks = [began] + [self.completed_at[k * WINDOW - 1]
                           for k in range(1, len(self.completed_at) // WINDOW + 1)]
        windows = [WINDOW / (b - a) for a, b in zip(marks, marks[1:])]
        return {
            "elapsed": elapsed, "windows": windows, "dead": dead, "sizes": sizes, "left": left,
            "drain_ids": drain_ids, "drained": drained, "single_empty": single_empty, "after": after,
            "single_ms": 1000 * single_s / max(1, len(drained)),
        }

    def per_window(self, rows, value_index: int) -> list[float]:
        out = []
        for w in range(TOTAL // WINDOW):
            vals = [r[value_index] for r in rows if w * WINDOW <= r[0] < (w + 1) * WINDOW]
            out.append(statistics.mean(vals) if vals else float("nan"))
        return out

    def check(self, res: dict) -> None:
        assert not self.errors, self.errors
        assert len(self.created) == TOTAL
        assert sorted(self.completed) == sorted(self.created), "not every message was completed exactly once"
        assert not self.refused, f"complete refused a current token: {self.refused[:10]}"
        ids = [d[0] for d in self.delivered]
        assert len(ids) == len(set(ids)), "a message was delivered twice"
        assert all(d[1] == 1 and not d[2] for d in self.delivered), "a redelivery (60 s locks never expire here)"
        assert len(res["windows"]) == TOTAL // WINDOW
        assert not res["single_empty"], (
            f"{self.label}: a single consumer got {len(res['single_empty'])} empty dequeues while ready "
            f"messages remained (at calls {res['single_empty'][:10]})")
        assert sorted(r[0] for r in res["drained"]) == sorted(res["drain_ids"])
        assert res["after"] == [] and res["left"] == 0


def _per_index(churn: Churn) -> str:
    """Mean index entries read per probed dequeue, per index, first and last window."""
    first = [p[2] for p in churn.probes if p[0] < WINDOW]
    last = [p[2] for p in churn.probes if p[0] >= TOTAL - WINDOW]
    names = sorted({k for p in churn.probes for k in p[2]})
    parts = []
    for name in names:
        f = statistics.mean(p.get(name, 0) for p in first) if first else float("nan")
        la = statistics.mean(p.get(name, 0) for p in last) if last else float("nan")
        if f or la:
            parts.append(f"{name} {f:.0f}/{la:.0f}")
    return ", ".join(parts)


def _fmt(xs, digits=0):
    return "[" + ", ".join(f"{x:.{digits}f}" for x in xs) + "]"


def test_dequeue_under_a_long_open_transaction(db, cluster, template_db):
    held_name = f"{db.name}_held"[:63]
    cluster.create_database(held_name, template=template_db)
    holder = None
    try:
        baseline = Churn(db.dsn, "baseline")
        base = baseline.run()
        baseline.check(base)

        held_dsn = cluster.dsn(held_name)
        holder = psycopg.connect(held_dsn, autocommit=False)
        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1")  # the snapshot is taken here and held
        with psycopg.connect(held_dsn, autocommit=True) as c:
            xmin = c.execute("SELECT backend_xmin FROM pg_stat_activity WHERE pid = %s",
                             (holder.info.backend_pid,)).fetchone()[0]
        assert xmin is not None, "the held transaction has no snapshot"
        held = Churn(held_dsn, "held")
        res = held.run()
        # the held transaction is still open and its snapshot still in use
        assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert holder.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0] == 0
        held.check(res)
    finally:
        if holder is not None:
            holder.rollback()
            holder.close()
        cluster.drop_database(held_name)

    bw, hw = base["windows"], res["windows"]
    b_read, h_read = baseline.per_window(baseline.probes, 1), held.per_window(held.probes, 1)
    b_idx, h_idx = _per_index(baseline), _per_index(held)
    b_ms = [1000 * x for x in baseline.per_window(baseline.call_times, 1)]
    h_ms = [1000 * x for x in held.per_window(held.call_times, 1)]
    print(
        f"\nlong transaction: {TOTAL} messages, {WORKERS} workers, {CHANNELS} channels, windows of {WINDOW}\n"
        f"  throughput (completed/s) per window: baseline {_fmt(bw)}; held {_fmt(hw)}\n"
        f"  overall: baseline {TOTAL / base['elapsed']:.0f}/s in {base['elapsed']:.1f} s; "
        f"held {TOTAL / res['elapsed']:.0f}/s in {res['elapsed']:.1f} s\n"
        f"  slowdown held/baseline: first window {bw[0] / hw[0]:.2f}x, last window {bw[-1] / hw[-1]:.2f}x, "
        f"overall {res['elapsed'] / base['elapsed']:.2f}x; last/first window: baseline "
        f"{bw[0] / bw[-1]:.2f}x, held {hw[0] / hw[-1]:.2f}x\n"
        f"  dequeue + complete ms per call (4 workers): baseline {_fmt(b_ms, 2)}; held {_fmt(h_ms, 2)}\n"
        f"  index entries read per dequeue call (probes, all lonnymq indexes): "
        f"baseline {_fmt(b_read, 1)}; held {_fmt(h_read, 1)}\n"
        f"    per index, first / last window: baseline {b_idx}\n"
        f"    held {h_idx}\n"
        f"  single consumer draining {DRAIN}: baseline {base['single_ms']:.2f} ms, held {res['single_ms']:.2f} ms "
        f"per dequeue + complete\n"
        f"  dead tuples (relname, live, dead): baseline {base['dead']}; held {res['dead']}\n"
        f"  sizes (bytes): baseline {base['sizes']}; held {res['sizes']}\n"
        f"  empty dequeues during churn: baseline {baseline.empties} of {baseline.calls}, "
        f"held {held.empties} of {held.calls}; of which with more than {WORKERS} unlocked ready messages "
        f"just after: baseline {_suspect(baseline)}, held {_suspect(held)}"
    )


def _suspect(churn: Churn) -> str:
    """Empty dequeues after which more ready messages were found unlocked than the other workers could
    hold (not asserted: a producer's batch of 100 may have committed in between)."""
    bad = [e for e in churn.empty_ready if e[1] > WORKERS]
    return f"{len(bad)} {bad[:5]}" if bad else "0"
