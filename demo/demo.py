"""lonnymq demo: a producer, a crashed worker and four workers on a throwaway cluster.

Run with `make demo` (which installs the extension first) or, once lonnymq is
installed in the system PostgreSQL, `.venv/bin/python demo/demo.py`.

What it does:
  1. starts a private PostgreSQL cluster (lonnymq_dev/pgcluster.py), creates a
     database and runs CREATE EXTENSION lonnymq;
  2. sets up four channels: emails (max_concurrency 2), webhooks
     (release_interval_ms 200), reports (max_size 5) and orders (no limits,
     created implicitly by its first message);
  3. produces messages, the orders inside a business transaction (and shows
     that a rolled-back business transaction leaves no message);
  4. a "crashed" worker takes an order with a short lock and never completes it;
  5. four worker threads, each with its own connection, loop
     dequeue -> process -> complete (one order fails once and is deferred with
     saved state; one long report keeps its lock with heartbeats); the crashed
     worker's order is recovered once its lock expires, and the crashed
     worker's stale fencing token is then refused;
  6. prints a summary and checks every claim it makes: exit status 1 if a
     message was lost or delivered too often, or a limit was exceeded;
  7. per-tenant ordered channels configured once by a name pattern, and a
     topic's fan-out in a business transaction, and the metrics in
     Prometheus' text format (demo/peers_demo.py);
  8. the Spark pipeline (demo/pipeline_demo.py): a generated dataset is
     enqueued exactly once through Spark, workers process it with retries
     (message_fail) and a dead letter or two, and the export prints the
     per-channel summary and writes the PNG charts (kept in
     demo/output/ after the run).

The cluster is stopped and removed on exit, also after an error.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from lonnymq_dev.pgcluster import Cluster

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 4
LOCK_MS = 1000  # the workers' lock duration
CRASH_LOCK_MS = 800  # the crashed worker's (short) lock
POLL_S = 0.025  # a worker's pause when nothing is ready
RETRY_DELAY_MS = 300  # the flaky order's retry delay
DELAY_MS = 1500  # the scheduled order's delay
HEARTBEAT_EVERY_S = 0.3
BIG_REPORT_S = 1.5  # longer than LOCK_MS: needs heartbeats
DEADLINE_S = 20  # the workload must be done by then

LIMITS = {
    "emails": {"p_max_concurrency": 2},
    "webhooks": {"p_release_interval_ms": 200},
    "reports": {"p_max_size": 5},
}
WORK_S = {"email": 0.15, "webhook": 0.01, "report": 0.05, "order": 0.05}

T0 = time.monotonic()
_print_lock = threading.Lock()


def log(who: str, text: str, channel: str = "", mid: int | None = None, attempt: int | None = None) -> None:
    """One line of the event log: time since start, who, channel, message, attempt."""
    t = time.monotonic() - T0
    m = f"#{mid}" if mid is not None else ""
    a = f"att {attempt}" if attempt is not None else ""
    with _print_lock:
        print(f"{t:7.3f}s  {who:<9} {channel:<9} {m:<5} {a:<6} {text}", flush=True)


def heading(text: str, columns: bool = True) -> None:
    with _print_lock:
        print(f"\n== {text}", flush=True)
        if columns:
            print(f"{'time':>8}  {'who':<9} {'channel':<9} {'msg':<5} {'att':<6} event", flush=True)


@dataclass
class Delivery:
    id: int
    channel: str
    kind: str
    text: str
    attempt: int
    recovered: bool
    state: bytes | None
    served_at: int  # server clock (epoch ms) of the dequeue
    worker: str


class Book:
    """What happened, shared by all threads (every access under the lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.created: dict[str, list[int]] = {c: [] for c in ("emails", "webhooks", "reports", "orders")}
        self.dropped: dict[str, int] = {c: 0 for c in self.created}
        self.kind: dict[int, str] = {}
        self.deliveries: list[Delivery] = []
        self.completed: dict[int, int] = {}  # id -> number of completes that returned true
        self.inflight: dict[str, int] = {c: 0 for c in self.created}
        self.max_inflight: dict[str, int] = {c: 0 for c in self.created}
        self.deferred: dict[int, bytes] = {}  # id -> state saved with message_defer
        self.heartbeats: list[bool] = []
        self.delayed: tuple[int, int] | None = None  # (id, dequeue_at)
        self.rollback_ok = False
        self.errors: list[str] = []
        # The crash scenario.
        self.crashed: tuple[int, int] | None = None  # (id, token) the crashed worker held
        self.recovered = threading.Event()  # a worker got the crashed worker's message
        self.recovered_token: int | None = None
        self.stale_tried = threading.Event()  # the crashed worker presented its old token
        self.stale_result: bool | None = None

    def add_created(self, channel: str, mid: int | None, kind: str) -> None:
        with self.lock:
            if mid is None:
                self.dropped[channel] += 1
            else:
                self.created[channel].append(mid)
                self.kind[mid] = kind

    def start(self, d: Delivery) -> None:
        with self.lock:
            self.deliveries.append(d)
            self.inflight[d.channel] += 1
            self.max_inflight[d.channel] = max(self.max_inflight[d.channel], self.inflight[d.channel])

    def stop(self, channel: str) -> None:
        with self.lock:
            self.inflight[channel] -= 1

    def complete(self, mid: int) -> None:
        with self.lock:
            self.completed[mid] = self.completed.get(mid, 0) + 1

    def all_done(self) -> bool:
        with self.lock:
            ids = [i for ids in self.created.values() for i in ids]
            return bool(ids) and all(self.completed.get(i, 0) >= 1 for i in ids)


BOOK = Book()


# ---------------------------------------------------------------- setup


def setup(conn: psycopg.Connection) -> None:
    heading("setup")
    conn.execute("CREATE EXTENSION lonnymq")
    log("setup", "CREATE EXTENSION lonnymq")
    conn.execute("CREATE TABLE shop_order (id bigint PRIMARY KEY, item text NOT NULL)")
    log("setup", "CREATE TABLE shop_order (the business data)")
    for channel, limits in LIMITS.items():
        args = ", ".join(f"{k} => {v}" for k, v in limits.items())
        conn.execute(
            "SELECT lonnymq.channel_set(%s, " + ", ".join(f"{k} => %s" for k in limits) + ")",
            (channel, *limits.values()),
        )
        log("setup", f"channel_set('{channel}', {args})", channel)
    log("setup", "'orders' gets no channel_set: its first message creates it, without limits")


def create(conn: psycopg.Connection, channel: str, kind: str, text: str, dequeue_at: int | None = None) -> int | None:
    content = json.dumps({"kind": kind, "text": text}).encode()
    mid = conn.execute(
        "SELECT lonnymq.message_create(%s, %s, %s)", (channel, content, dequeue_at)
    ).fetchone()[0]
    BOOK.add_created(channel, mid, kind)
    if mid is None:
        log("producer", f"message_create -> NULL: dropped, channel full ({text})", channel)
    else:
        log("producer", f"created ({text})", channel, mid)
    return mid


def produce(conn: psycopg.Connection) -> None:
    heading("producer")
    # Orders: the message exists if and only if the business transaction commits.
    with conn.transaction():
        for oid, item, kind in (
            (1001, "2 x teapot", "order"),
            (1002, "1 x kettle", "order"),
            (1003, "3 x mug (payment gateway flaky)", "flaky-order"),
            (1004, "1 x tray", "order"),
        ):
            conn.execute("INSERT INTO shop_order VALUES (%s, %s)", (oid, item))
            create(conn, "orders", kind, f"order {oid}: {item}")
    log("producer", "COMMIT: 4 orders and their 4 messages, atomically", "orders")

    class PaymentDeclined(Exception):
        pass

    before = conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0]
    try:
        with conn.transaction():
            conn.execute("INSERT INTO shop_order VALUES (1005, '1 x spoon')")
            mid = conn.execute(
                "SELECT lonnymq.message_create('orders', %s)",
                (json.dumps({"kind": "order", "text": "order 1005"}).encode(),),
            ).fetchone()[0]
            log("producer", "created (order 1005), then the payment is declined", "orders", mid)
            raise PaymentDeclined
    except PaymentDeclined:
        pass
    after = conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0]
    order = conn.execute("SELECT count(*) FROM shop_order WHERE id = 1005").fetchone()[0]
    log("producer", f"ROLLBACK: order 1005 rows={order}, messages {before} -> {after} (#{mid} never existed)", "orders")
    BOOK.rollback_ok = order == 0 and after == before and conn.execute(
        "SELECT count(*) FROM lonnymq.message WHERE id = %s", (mid,)
    ).fetchone()[0] == 0

    for i in range(1, 7):
        create(conn, "emails", "email", f"welcome mail {i}")
    for i in range(1, 7):
        create(conn, "webhooks", "webhook", f"POST /hook {i}")
    create(conn, "reports", "big-report", "yearly report (slow: keeps its lock with heartbeats)")
    for i in range(2, 8):
        create(conn, "reports", "report", f"daily report {i}")


def produce_scheduled(conn: psycopg.Connection) -> None:
    at, mid = conn.execute(
        "SELECT x.at, lonnymq.message_create('orders', %s, x.at)"
        " FROM (SELECT lonnymq.to_epoch(clock_timestamp()) + %s AS at) AS x",
        (json.dumps({"kind": "order", "text": "order 1006 (scheduled)"}).encode(), DELAY_MS),
    ).fetchone()
    BOOK.add_created("orders", mid, "order")
    BOOK.delayed = (mid, at)
    log("producer", f"created (order 1006), p_dequeue_at = now + {DELAY_MS} ms", "orders", mid)


# ---------------------------------------------------------------- workers


def dequeue(conn: psycopg.Connection, who: str, lock_ms: int, channel: str | None = None) -> Delivery | None:
    with conn.transaction():
        row = conn.execute(
            "SELECT id, channel, content, state, num_attempts, is_recovered"
            " FROM lonnymq.message_dequeue(p_lock_ms => %s, p_channel => %s)",
            (lock_ms, channel),
        ).fetchone()
        if row is None:
            return None
        # For the demo's checks only: the server's clock at delivery is the new
        # lock expiry minus lock_ms (read in the same transaction).
        served_at = conn.execute(
            "SELECT dequeue_at - %s FROM lonnymq.message WHERE id = %s", (lock_ms, row[0])
        ).fetchone()[0]
    mid, chan, content, state, attempt, recovered = row
    body = json.loads(content)
    return Delivery(mid, chan, body["kind"], body["text"], attempt, recovered, state, served_at, who)


def handle(conn: psycopg.Connection, d: Delivery) -> None:
    BOOK.start(d)
    note = f"dequeued: {d.text}"
    if d.recovered:
        note += " (recovered: the previous lock expired)"
    if d.state is not None:
        note += f", saved state {d.state.decode()}"
    log(d.worker, note, d.channel, d.id, d.attempt)

    if d.recovered and BOOK.crashed and d.id == BOOK.crashed[0]:
        BOOK.recovered_token = d.attempt
        BOOK.recovered.set()
        BOOK.stale_tried.wait(LOCK_MS / 2000)  # let the crashed worker try its old token now

    if d.kind == "flaky-order" and d.state is None:
        time.sleep(WORK_S["order"])
        BOOK.stop(d.channel)
        state = json.dumps({"error": "gateway timeout", "failed_attempt": d.attempt}).encode()
        ok = conn.execute(
            "SELECT lonnymq.message_defer(%s, %s,"
            " p_dequeue_at => lonnymq.to_epoch(clock_timestamp()) + %s, p_state => %s)",
            (d.id, d.attempt, RETRY_DELAY_MS, state),
        ).fetchone()[0]
        with BOOK.lock:
            BOOK.deferred[d.id] = state
        log(d.worker, f"failed (gateway timeout): deferred {RETRY_DELAY_MS} ms, state saved -> {ok}", d.channel, d.id, d.attempt)
        return

    if d.kind == "big-report":
        end = time.monotonic() + BIG_REPORT_S
        while time.monotonic() < end:
            time.sleep(HEARTBEAT_EVERY_S)
            ok = conn.execute(
                "SELECT lonnymq.message_heartbeat(%s, %s, %s)", (d.id, d.attempt, LOCK_MS)
            ).fetchone()[0]
            with BOOK.lock:
                BOOK.heartbeats.append(ok)
            log(d.worker, f"heartbeat: lock extended to now + {LOCK_MS} ms -> {ok}", d.channel, d.id, d.attempt)
    else:
        time.sleep(WORK_S[d.kind.split("-")[-1]])

    BOOK.stop(d.channel)
    ok = conn.execute("SELECT lonnymq.message_complete(%s, %s)", (d.id, d.attempt)).fetchone()[0]
    if ok:
        BOOK.complete(d.id)
    log(d.worker, f"completed -> {ok}", d.channel, d.id, d.attempt)


def worker(name: str, dsn: str, stop: threading.Event) -> None:
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                d = dequeue(conn, name, LOCK_MS)
                if d is None:
                    time.sleep(POLL_S)
                    continue
                handle(conn, d)
    except Exception as exc:  # noqa: BLE001 - reported by the main thread
        if not stop.is_set():
            with BOOK.lock:
                BOOK.errors.append(f"{name}: {type(exc).__name__}: {exc}")


def crashed_worker(dsn: str) -> None:
    """Takes the first order with a short lock and dies without completing it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        d = dequeue(conn, "w0", CRASH_LOCK_MS, channel="orders")
    if d is None:
        raise RuntimeError("the crashed worker found no order to take")
    BOOK.crashed = (d.id, d.attempt)
    with BOOK.lock:
        BOOK.deliveries.append(d)
    log("w0", f"dequeued with a {CRASH_LOCK_MS} ms lock, then crashed (connection closed)", d.channel, d.id, d.attempt)


def crashed_worker_returns(dsn: str, stop: threading.Event) -> None:
    """The crashed worker comes back and presents its old fencing token."""
    try:
        while not stop.is_set() and not BOOK.recovered.wait(0.1):
            pass
        if stop.is_set():
            return
        mid, token = BOOK.crashed
        with psycopg.connect(dsn, autocommit=True) as conn:
            ok = conn.execute("SELECT lonnymq.message_complete(%s, %s)", (mid, token)).fetchone()[0]
        BOOK.stale_result = ok
        log("w0", f"back; message_complete(#{mid}, {token}) with its stale token -> {ok}", "orders", mid, token)
    except Exception as exc:  # noqa: BLE001
        with BOOK.lock:
            BOOK.errors.append(f"w0: {type(exc).__name__}: {exc}")
    finally:
        BOOK.stale_tried.set()


# ---------------------------------------------------------------- summary


def summarize(conn: psycopg.Connection) -> list[tuple[bool, str]]:
    checks: list[tuple[bool, str]] = []

    def check(ok: bool, text: str) -> None:
        checks.append((bool(ok), text))

    b = BOOK
    heading("summary", columns=False)
    print(f"{'channel':<9} {'limits':<24} {'created':>7} {'dropped':>7} {'completed':>9} {'deliveries':>10}")
    for channel in b.created:
        limits = ", ".join(f"{k[2:]}={v}" for k, v in LIMITS.get(channel, {}).items()) or "none"
        ids = b.created[channel]
        done = sum(1 for i in ids if b.completed.get(i, 0) >= 1)
        n = sum(1 for d in b.deliveries if d.channel == channel)
        print(f"{channel:<9} {limits:<24} {len(ids):>7} {b.dropped[channel]:>7} {done:>9} {n:>10}")
    print()

    left = conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0]
    all_ids = [i for ids in b.created.values() for i in ids]
    check(b.rollback_ok, "a rolled-back business transaction left neither its order nor its message")
    check(len(b.created["reports"]) == 5 and b.dropped["reports"] == 2,
          f"reports (max_size 5): {len(b.created['reports'])} stored, {b.dropped['reports']} dropped (NULL id)")
    check(all(b.completed.get(i, 0) == 1 for i in all_ids) and left == 0,
          f"each of the {len(all_ids)} stored messages completed exactly once; {left} left in lonnymq.message")

    conc = b.max_inflight["emails"]
    check(conc <= 2, f"emails (max_concurrency 2): at most {conc} processed at once (6 messages, {WORKERS} workers)")

    served = sorted(d.served_at for d in b.deliveries if d.channel == "webhooks")
    gaps = [y - x for x, y in zip(served, served[1:])]
    min_gap = min(gaps) if gaps else None
    check(min_gap is not None and min_gap >= 200,
          f"webhooks (release_interval_ms 200): minimum gap between deliveries {min_gap} ms (server clock)")

    crash = b.crashed
    rec = [d for d in b.deliveries if crash and d.id == crash[0] and d.attempt > crash[1]]
    check(len(rec) == 1 and rec[0].recovered and rec[0].attempt == 2 and b.stale_result is False,
          "crashed worker: its order was recovered after the lock expired (is_recovered = true, "
          f"num_attempts = {rec[0].attempt if rec else '?'}) and its stale token was refused "
          f"(message_complete -> {b.stale_result})")

    flaky = [d for d in b.deliveries if d.kind == "flaky-order"]
    check(len(flaky) == 2 and flaky[0].state is None and flaky[1].state == b.deferred.get(flaky[0].id)
          and [d.attempt for d in flaky] == [1, 2] and not flaky[1].recovered,
          "flaky order: failed on attempt 1, deferred with its state, redelivered as attempt 2 with that state")

    big = [d for d in b.deliveries if d.kind == "big-report"]
    check(len(big) == 1 and b.heartbeats and all(b.heartbeats),
          f"yearly report: ran {BIG_REPORT_S} s on a {LOCK_MS} ms lock, {len(b.heartbeats)} heartbeats, delivered once")

    if b.delayed:
        mid, at = b.delayed
        got = [d.served_at for d in b.deliveries if d.id == mid]
        check(len(got) == 1 and got[0] >= at,
              f"scheduled order: delivered {got[0] - at if got else '?'} ms after its dequeue_at, not before")

    expected_twice = {crash[0] if crash else None} | {d.id for d in flaky}
    extra = [i for i in all_ids if i not in expected_twice and sum(1 for d in b.deliveries if d.id == i) != 1]
    check(not extra, f"no other message was delivered more than once {extra if extra else ''}".rstrip())
    check(not b.errors, "no worker raised an error" + (": " + "; ".join(b.errors) if b.errors else ""))
    return checks


# ---------------------------------------------------------------- main


def run(cluster: Cluster) -> int:
    cluster.create_database("demo", with_extension=False)
    dsn = cluster.dsn("demo")
    log("main", f"throwaway cluster up (port {cluster.port}), database demo created")
    with psycopg.connect(dsn, autocommit=True) as conn:
        setup(conn)
        produce(conn)

        heading("workers")
        crashed_worker(dsn)
        produce_scheduled(conn)

        stop = threading.Event()
        threads = [threading.Thread(target=crashed_worker_returns, args=(dsn, stop), daemon=True)]
        threads += [
            threading.Thread(target=worker, args=(f"w{i}", dsn, stop), daemon=True)
            for i in range(1, WORKERS + 1)
        ]
        try:
            for t in threads:
                t.start()
            deadline = time.monotonic() + DEADLINE_S
            while not BOOK.all_done() and not BOOK.errors and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)  # let late duplicates, if any, show up
        finally:
            stop.set()
            for t in threads:
                t.join(10)
        if not BOOK.all_done():
            log("main", f"workload not finished within {DEADLINE_S} s")

        checks = summarize(conn)
    from peers_demo import run_peers_demo

    checks += run_peers_demo(dsn)
    print()
    failed = [text for ok, text in checks if not ok]
    for ok, text in checks:
        print(f"  {'ok    ' if ok else 'FAILED'}  {text}")
    print(f"\n{len(checks) - len(failed)} passed, {len(failed)} failed")
    if failed:
        return 1

    print("\n== The Spark pipeline: bulk enqueue, workers with retries, export ==")
    from pipeline_demo import run_pipeline_demo

    out = ROOT / "demo" / "output"
    out.mkdir(parents=True, exist_ok=True)
    try:
        run_pipeline_demo(dsn, out)
    except RuntimeError as exc:
        print(f"  FAILED  pipeline demo: {exc}")
        return 1
    print(f"\npipeline demo passed; its export and charts are in {out.relative_to(ROOT)}/")
    return 0


def main() -> int:
    log("main", "starting a throwaway PostgreSQL cluster")
    with Cluster() as cluster:
        try:
            return run(cluster)
        finally:
            log("main", "stopping the cluster")


if __name__ == "__main__":
    sys.exit(main())
