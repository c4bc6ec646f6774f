"""Faults: workers that die mid-job, and a server that crashes under load.

* A worker's backend is terminated (pg_terminate_backend) after its dequeue
  committed: the message stays locked until the lock expires (not before),
  is then delivered again with one more attempt and is_recovered, and the dead
  worker's token is refused.  Terminated while the dequeue transaction is
  still open: the dequeue rolls back and the message is available at once,
  the attempt not counted.
* The same with a real worker process killed with SIGKILL.
* The server is stopped with `pg_ctl stop -m immediate` while producers and
  consumers run (a private cluster, so the session cluster is untouched).
  After the restart nothing acknowledged is lost, nothing completed comes
  back, nothing uncommitted appears, the limit counters agree with the
  messages, and the queue works without repair.

Lock-expiry ordering is checked on server clock values only: the expiry the
first delivery stored in `dequeue_at`, against the clock reading of the
redelivering `message_dequeue` call (its new lock minus its `p_lock_ms`).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psycopg
import pytest

from conftest import collect_refused
from lonnymq_dev.pgcluster import Cluster
from lonnymq_dev.calls import scalar, dequeue, dequeue_one, complete, complete_dequeue
from lonnymq_dev.invariants import assert_nothing_below_the_marks

NOW_MS = "SELECT lonnymq.to_epoch(clock_timestamp())"

# Channel kinds for the worker-death tests: (name, channel_set arguments or None).
KINDS = {
    "plain": None,
    "max_concurrency": "p_max_concurrency => 1",
    "max_size": "p_max_size => 1",
    "release_interval": "p_release_interval_ms => 200",
}


# ---------------------------------------------------------------- helpers


def _setup_channel(conn, channel: str, kind: str) -> int:
    """Create the channel with the kind's limits and one message; its id."""
    if KINDS[kind]:
        conn.execute(f"SELECT lonnymq.channel_set(%s, {KINDS[kind]})", (channel,))
    mid = scalar(conn, "SELECT lonnymq.message_create(%s, %s)", (channel, b"job"))
    assert mid is not None
    return mid


def _counters(conn, channel: str) -> dict:
    """The channel's counters next to what they count (a channel without
    configuration has no row: its counters are None).  held: the channel's
    messages, which max_size counts: not a wake (schedule '', no message,
    which a delivery in a channel with a release interval leaves)."""
    row = conn.execute(
        """
        SELECT c.max_concurrency, c.release_interval_ms, c.num_admitted, m.admitted, c.num_pending, m.pending,
               m.locked, c.max_size, q.num_created - c.num_removed, m.held
        FROM (
            SELECT count(*) FILTER (WHERE is_admitted) AS admitted,
                   count(*) FILTER (WHERE is_admitted AND (NOT is_locked OR position IS NOT NULL)) AS pending,
                   count(*) FILTER (WHERE is_locked) AS locked,
                   count(*) FILTER (WHERE schedule IS NULL) AS held
            FROM lonnymq.message WHERE channel = %s
        ) AS m
        LEFT JOIN lonnymq.channel AS c ON c.name = %s
        LEFT JOIN lonnymq.channel_quota AS q ON q.channel_id = c.id
        """,
        (channel, channel),
    ).fetchone()
    keys = ("max_concurrency", "release_interval_ms", "num_admitted", "admitted", "num_pending", "pending",
            "locked", "max_size", "held_counter", "held")
    return dict(zip(keys, row))


def _assert_counters_consistent(conn, channel: str) -> dict:
    """Admission agrees with the messages (every lock of a max_concurrency
    channel admitted, never more admitted than it allows; one admitted
    undelivered message at most with a release interval), and so does the
    quota of a max_size channel."""
    c = _counters(conn, channel)
    if c["max_concurrency"] is not None or (c["release_interval_ms"] or 0) > 0:
        assert c["num_admitted"] == c["admitted"], f"{channel}: num_admitted disagrees with the messages: {c}"
    else:
        assert c["admitted"] == 0, f"{channel}: admitted messages in a channel without limits: {c}"
    if c["max_concurrency"] is not None:
        assert c["locked"] <= c["admitted"] <= c["max_concurrency"], f"{channel}: admission broke the limit: {c}"
    if (c["release_interval_ms"] or 0) > 0:
        assert c["num_pending"] == c["pending"] <= 1, f"{channel}: num_pending disagrees with the messages: {c}"
    if c["max_size"] is not None:
        assert c["held_counter"] == c["held"], f"{channel}: created - removed disagrees with the messages: {c}"
    return c


def _message(conn, mid: int):
    return conn.execute(
        "SELECT is_locked, num_attempts, dequeue_at FROM lonnymq.message WHERE id = %s", (mid,)
    ).fetchone()


def _poll_dequeue(conn, channel: str | None, lock_ms: int) -> tuple[list, int, int, dict]:
    """One dequeue in a transaction of its own, bracketed by server clock
    readings.  Returns (rows, clock before, clock after, {id: the call's own
    clock reading}), the last derived from the lock the call stored."""
    with conn.transaction():
        before = scalar(conn, NOW_MS)
        rows = conn.execute(
            "SELECT id, channel, num_attempts, dequeue_at, is_recovered "
            "FROM lonnymq.message_dequeue(%s, 100, %s)",
            (lock_ms, channel),
        ).fetchall()
        after = scalar(conn, NOW_MS)
        called_at = {
            mid: expiry - lock_ms
            for mid, expiry in conn.execute(
                "SELECT id, dequeue_at FROM lonnymq.message WHERE id = ANY(%s)", ([r[0] for r in rows],)
            ).fetchall()
        }
    return rows, before, after, called_at


def _wait_backend_gone(conn, pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)):
        if time.monotonic() > deadline:
            raise AssertionError(f"backend {pid} is still alive")
        time.sleep(0.02)


def _check_redelivery_after_expiry(conn, channel: str, mid: int, old_token: int, expiry: int) -> int:
    """Poll until the message comes back; it must not come back before its
    lock expired.  Returns the new token."""
    lock_ms = 30_000
    empty_before_expiry = 0
    deadline = time.monotonic() + (expiry - scalar(conn, NOW_MS)) / 1000 + 10
    while True:
        rows, before, after, called_at = _poll_dequeue(conn, channel, lock_ms)
        if rows:
            break
        if after < expiry:
            empty_before_expiry += 1
        assert time.monotonic() < deadline, "the message was never delivered again after its lock expired"
        time.sleep(0.05)
    assert empty_before_expiry > 0, "no dequeue ran before the lock expired: the test proved nothing"
    assert len(rows) == 1, rows
    got_id, got_channel, token, returned_dequeue_at, recovered = rows[0]
    assert (got_id, got_channel) == (mid, channel)
    assert called_at[mid] >= expiry, (
        f"delivered again at server time {called_at[mid]}, {expiry - called_at[mid]} ms before "
        f"the dead worker's lock expired ({expiry})"
    )
    assert token == old_token + 1, "the recovery must count an attempt"
    assert recovered is True
    assert returned_dequeue_at == expiry, "a recovered message reports the expiry of the lapsed lock"
    return token


def _finish_after_recovery(conn, channel: str, mid: int, old_token: int, new_token: int) -> None:
    assert complete(conn, mid, old_token) is False, (
        "the dead worker's stale token was accepted"
    )
    assert scalar(conn, "SELECT lonnymq.message_heartbeat(%s, %s, 1000)", (mid, old_token)) is False
    assert complete(conn, mid, new_token) is True
    assert _message(conn, mid) is None
    c = _assert_counters_consistent(conn, channel)
    assert c["locked"] == 0 and c["held"] == 0
    # the channel is usable again, its limits intact
    assert scalar(conn, "SELECT lonnymq.message_create(%s, 'next')", (channel,)) is not None


def _check_available_at_once(conn, channel: str, mid: int) -> None:
    """After a dequeue that never committed: no lock, no attempt."""
    assert _message(conn, mid)[:2] == (False, 0), "the rolled-back dequeue left a lock or an attempt"
    c = _assert_counters_consistent(conn, channel)
    assert c["locked"] == 0
    rows, _, _, _ = _poll_dequeue(conn, channel, 30_000)
    assert [(r[0], r[2], r[4]) for r in rows] == [(mid, 1, False)], (
        "the message must be deliverable at once, as a first attempt"
    )
    assert scalar(conn, "SELECT lonnymq.message_complete(%s, 1)", (mid,)) is True
    _assert_counters_consistent(conn, channel)


# ------------------------------------------- 1. pg_terminate_backend


@pytest.mark.parametrize("kind", list(KINDS))
def test_terminated_worker_after_dequeue_commit_is_recovered_after_lock_expiry(db, kind):
    lock_ms = 1500
    admin = db.connect()
    channel = f"term_{kind}"
    mid = _setup_channel(admin, channel, kind)

    worker = db.connect()
    pid = worker.info.backend_pid
    row = dequeue_one(worker, lock_ms, channel=channel)  # autocommit: the lock and the attempt are committed
    assert row == (mid, 1)
    is_locked, attempts, expiry = _message(admin, mid)
    assert (is_locked, attempts) == (True, 1)

    # the job runs in the worker's backend when the backend is terminated
    errors: list[BaseException] = []

    def job():
        try:
            worker.execute("SELECT pg_sleep(60) /* fault-job */")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=job)
    t.start()
    deadline = time.monotonic() + 10
    while not scalar(admin, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND state = 'active' "
                             "AND query LIKE '%%fault-job%%'", (pid,)):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.02)
    assert scalar(admin, "SELECT pg_terminate_backend(%s, 5000)", (pid,)) is True
    t.join(10)
    assert not t.is_alive() and errors and isinstance(errors[0], psycopg.OperationalError), errors
    _wait_backend_gone(admin, pid)

    # the committed delivery survives its backend
    assert _message(admin, mid) == (True, 1, expiry)
    c = _assert_counters_consistent(admin, channel)
    if kind == "max_concurrency":
        assert (c["num_admitted"], c["locked"]) == (1, 1)

    token = _check_redelivery_after_expiry(admin, channel, mid, 1, expiry)
    _finish_after_recovery(admin, channel, mid, 1, token)


@pytest.mark.parametrize("kind", list(KINDS))
def test_terminated_worker_inside_the_dequeue_transaction_rolls_the_delivery_back(db, kind):
    admin = db.connect()
    channel = f"open_{kind}"
    mid = _setup_channel(admin, channel, kind)

    worker = db.connect(autocommit=False)
    pid = worker.info.backend_pid
    row = dequeue_one(worker, channel=channel)
    assert row == (mid, 1)
    # killed before it commits (idle in transaction)
    assert scalar(admin, "SELECT pg_terminate_backend(%s, 5000)", (pid,)) is True
    _wait_backend_gone(admin, pid)
    with pytest.raises(psycopg.OperationalError):
        worker.commit()

    _check_available_at_once(admin, channel, mid)


# ------------------------------------------- 2. SIGKILL of a worker process

WORKER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import psycopg

    dsn, channel, lock_ms, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    conn = psycopg.connect(dsn, autocommit=(mode != "open_transaction"))
    if mode == "worker_loop":  # the worker's call, with nothing to complete yet
        sql = "SELECT id, num_attempts FROM lonnymq.message_complete_dequeue(NULL, NULL, %s, 1, %s)"
    else:
        sql = "SELECT id, num_attempts FROM lonnymq.message_dequeue(%s, 1, %s)"
    row = conn.execute(sql, (lock_ms, channel)).fetchone()
    print(conn.info.backend_pid, row[0], row[1], flush=True)
    time.sleep(600)  # the job
    """
)


@pytest.mark.parametrize("mode", ["committed", "open_transaction", "worker_loop"])
def test_sigkilled_worker_process(db, mode):
    lock_ms = 1500
    admin = db.connect()
    channel = f"sigkill_{mode}"
    mid = _setup_channel(admin, channel, "max_concurrency")

    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT, db.dsn, channel, str(lock_ms), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line, f"the worker printed nothing: {proc.stderr.read() if proc.poll() is not None else ''}"
        pid, got_id, token = map(int, line.split())
        assert (got_id, token) == (mid, 1)
        if mode != "open_transaction":
            expiry = _message(admin, mid)[2]
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    # the server backend notices the closed socket and exits
    _wait_backend_gone(admin, pid)

    if mode == "open_transaction":
        _check_available_at_once(admin, channel, mid)
        return
    assert _message(admin, mid) == (True, 1, expiry), "the committed delivery must outlive its worker"
    c = _assert_counters_consistent(admin, channel)
    assert (c["num_admitted"], c["locked"]) == (1, 1)
    new_token = _check_redelivery_after_expiry(admin, channel, mid, 1, expiry)
    _finish_after_recovery(admin, channel, mid, 1, new_token)


# ------------------------------------------- 3. server crash under load

LOAD_SECONDS = 2.5
LOAD_LOCK_MS = 2000
PRODUCERS = 3
CONSUMERS = 3
CONC_LIMIT = 2
SIZE_LIMIT = 25
CHANNELS = ["free_a", "free_b", "conc", "size"]


class Ledger:
    """What the clients saw.  'acked' = the commit returned; 'maybe' = the
    commit was sent and the connection died; 'aborted' = the transaction
    failed before its commit was sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.created: dict[int, bytes] = {}  # acked creates: id -> content
        self.maybe_created: set[int] = set()
        self.aborted_created: set[int] = set()
        self.completed: set[int] = set()  # message_complete returned true and committed
        self.maybe_completed: set[int] = set()
        self.completed_by_workers = 0  # of them, by message_complete_dequeue
        self.deliveries = 0
        self.recovered = 0
        self.unexpected: list[str] = []
        self.snapshot: set[int] = set()  # an observer's last committed view of the table
        self.snapshots = 0


def _producer(dsn: str, n: int, ledger: Ledger, stop: threading.Event, crashing: threading.Event) -> None:
    rng = random.Random(n)
    seq = 0
    try:
        conn = psycopg.connect(dsn, autocommit=False)
    except psycopg.Error as exc:
        ledger.unexpected.append(f"producer {n} connect: {exc}")
        return
    with conn:
        while not stop.is_set():
            ids: list[tuple[int, bytes]] = []
            try:
                for _ in range(rng.randint(1, 3)):
                    seq += 1
                    content = f"p{n}-{seq}".encode()
                    r = rng.random()
                    # mostly now; some scheduled a little later; some urgent
                    dequeue_at = None if r < 0.8 else ("future" if r < 0.92 else "urgent")
                    mid = scalar(
                        conn,
                        "SELECT lonnymq.message_create(%s, %s, CASE %s::text "
                        "WHEN 'future' THEN lonnymq.to_epoch(clock_timestamp()) + %s "
                        "WHEN 'urgent' THEN 0 END)",
                        (rng.choice(CHANNELS), content, dequeue_at, rng.randint(50, 800)),
                    )
                    if mid is not None:  # None: dropped by max_size
                        ids.append((mid, content))
            except psycopg.Error as exc:
                with ledger.lock:
                    ledger.aborted_created.update(i for i, _ in ids)
                if conn.broken:
                    if not crashing.is_set():
                        ledger.unexpected.append(f"producer {n}: {exc!r}")
                    return
                ledger.unexpected.append(f"producer {n}: {exc!r}")
                conn.rollback()
                continue
            try:
                conn.commit()
            except psycopg.Error as exc:
                with ledger.lock:
                    ledger.maybe_created.update(i for i, _ in ids)
                if not crashing.is_set():
                    ledger.unexpected.append(f"producer {n} commit: {exc!r}")
                return
            with ledger.lock:
                ledger.created.update(ids)
            time.sleep(rng.random() * 0.01)


def _consumer(dsn: str, n: int, ledger: Ledger, stop: threading.Event, crashing: threading.Event) -> None:
    """Dequeue, then per message: abandon, defer, or (heartbeat and) complete.
    Odd consumers run the worker loop: their completes ride on the next
    message_complete_dequeue, committed with it (a refused one is a NOTICE)."""
    rng = random.Random(100 + n)
    worker = n % 2 == 1
    pending: list[tuple[int, int]] = []  # finished, completed by the next call
    try:
        conn = psycopg.connect(dsn, autocommit=False)
    except psycopg.Error as exc:
        ledger.unexpected.append(f"consumer {n} connect: {exc}")
        return
    refused = collect_refused(conn)

    def failed(what, exc) -> bool:
        """True: stop (the server is gone)."""
        if conn.broken:
            if not crashing.is_set():
                ledger.unexpected.append(f"consumer {n} {what}: {exc!r}")
            return True
        ledger.unexpected.append(f"consumer {n} {what}: {exc!r}")
        conn.rollback()
        return False

    with conn:
        while not stop.is_set():
            refused.clear()
            try:
                if worker:
                    rows = complete_dequeue(conn, pending, LOAD_LOCK_MS, rng.randint(1, 3),
                                            columns="id, num_attempts, is_recovered")
                else:
                    rows = dequeue(conn, LOAD_LOCK_MS, rng.randint(1, 3), columns="id, num_attempts, is_recovered")
            except psycopg.Error as exc:
                if failed("dequeue", exc):
                    return
                continue  # rolled back: the pending completes are still pending
            done = {mid for mid, _ in pending} - set(refused)
            try:
                conn.commit()
            except psycopg.Error as exc:
                with ledger.lock:
                    ledger.maybe_completed.update(done)
                if failed("dequeue commit", exc):
                    return
                continue
            pending = []
            with ledger.lock:
                ledger.completed.update(done)
                ledger.completed_by_workers += len(done)
                ledger.deliveries += len(rows)
                ledger.recovered += sum(1 for r in rows if r[2])
            if not rows:
                time.sleep(0.01)
                continue
            for mid, token, _ in rows:
                r = rng.random()
                if r < 0.06:
                    continue  # the worker "dies": the lock lapses and the message is recovered
                time.sleep(rng.random() * 0.005)  # the job
                try:
                    if r < 0.16:
                        conn.execute(
                            "SELECT lonnymq.message_defer(%s, %s, lonnymq.to_epoch(clock_timestamp()) + %s, %s)",
                            (mid, token, rng.randint(0, 300), b"retry"),
                        )
                        conn.commit()
                        continue
                    if r < 0.26:
                        conn.execute("SELECT lonnymq.message_heartbeat(%s, %s, %s)", (mid, token, LOAD_LOCK_MS))
                        if worker:
                            conn.commit()
                    if worker:
                        pending.append((mid, token))
                        continue
                    ok = complete(conn, mid, token)
                except psycopg.Error as exc:
                    if failed("complete", exc):
                        return
                    continue
                try:
                    conn.commit()
                except psycopg.Error as exc:
                    if ok:
                        with ledger.lock:
                            ledger.maybe_completed.add(mid)
                    if failed("complete commit", exc):
                        return
                    continue
                if ok:
                    with ledger.lock:
                        ledger.completed.add(mid)


def _observer(dsn: str, ledger: Ledger, stop: threading.Event) -> None:
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                ids = scalar(conn, "SELECT coalesce(array_agg(id), '{}') FROM lonnymq.message")
                with ledger.lock:
                    ledger.snapshot = set(ids)
                    ledger.snapshots += 1
                time.sleep(0.05)
    except psycopg.Error:
        return


def _drain(conn, lock_ms: int, locked_at_crash: dict, attempts_before: dict, deadline: float) -> dict:
    """Dequeue and complete until the queue is empty, checking every delivery.
    Returns {id: (num_attempts, is_recovered)}."""
    delivered: dict[int, tuple[int, bool]] = {}
    while True:
        rows, _, _, called_at = _poll_dequeue(conn, None, lock_ms)
        per_channel: dict[str, int] = {}
        for mid, channel, token, returned_dequeue_at, recovered in rows:
            assert mid not in delivered, f"message {mid} delivered twice although its lock had not expired"
            per_channel[channel] = per_channel.get(channel, 0) + 1
            if mid in locked_at_crash:
                old_token, expiry = locked_at_crash[mid]
                assert called_at[mid] >= expiry, (
                    f"message {mid}, locked at the crash until {expiry}, was delivered again at "
                    f"server time {called_at[mid]}, before its lock expired"
                )
                assert recovered is True and returned_dequeue_at == expiry
                assert token == old_token + 1
            else:
                assert recovered is False, f"message {mid} was not locked, yet is_recovered"
                if mid in attempts_before:
                    assert token == attempts_before[mid] + 1
            delivered[mid] = (token, recovered)
            assert complete(conn, mid, token) is True
        assert per_channel.get("conc", 0) <= CONC_LIMIT, f"max_concurrency broken after the crash: {per_channel}"
        if not rows:
            if scalar(conn, "SELECT count(*) FROM lonnymq.message") == 0:
                return delivered
            assert time.monotonic() < deadline, (
                "messages are stuck after the crash: "
                + repr(conn.execute(
                    "SELECT m.id, m.channel, m.is_locked, m.dequeue_at, m.position, m.is_held, m.is_admitted, "
                    "c.num_admitted, c.num_pending, c.release_at, "
                    f"({NOW_MS}), (SELECT last_value FROM lonnymq.position_mark_seq), "
                    "(SELECT last_value FROM lonnymq.due_mark_seq) "
                    "FROM lonnymq.message AS m LEFT JOIN lonnymq.channel AS c ON c.id = m.channel_id "
                    "ORDER BY m.id LIMIT 20"
                ).fetchall())
            )
            time.sleep(0.05)


def test_server_crash_under_load_loses_nothing_acknowledged():
    cluster = Cluster()
    try:
        cluster.start()
        cluster.create_database("crash")  # CREATE EXTENSION lonnymq
        try:
            _crash_scenario(cluster, cluster.dsn("crash"))
        except BaseException:
            print(f"--- postgres log tail ({cluster.log_path}) ---\n{cluster.log_tail(4000)}", file=sys.stderr)
            raise
    finally:
        cluster.cleanup()


def _crash_scenario(cluster: Cluster, dsn: str) -> None:
    ledger = Ledger()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT lonnymq.channel_set('conc', p_max_concurrency => %s)", (CONC_LIMIT,))
        conn.execute("SELECT lonnymq.channel_set('size', p_max_size => %s)", (SIZE_LIMIT,))
        for ch in CHANNELS:  # a backlog, so that consumers have work from the start
            for mid, content in conn.execute(
                "SELECT lonnymq.message_create(%s, convert_to(%s || g, 'UTF8')), convert_to(%s || g, 'UTF8') "
                "FROM generate_series(1, 20) AS g",
                (ch, f"seed-{ch}-", f"seed-{ch}-"),
            ).fetchall():
                if mid is not None:
                    ledger.created[mid] = content

    stop = threading.Event()
    crashing = threading.Event()
    threads = [threading.Thread(target=_producer, args=(dsn, i, ledger, stop, crashing)) for i in range(PRODUCERS)]
    threads += [threading.Thread(target=_consumer, args=(dsn, i, ledger, stop, crashing)) for i in range(CONSUMERS)]
    observer_stop = threading.Event()
    observer = threading.Thread(target=_observer, args=(dsn, ledger, observer_stop))
    for t in threads:
        t.start()
    observer.start()
    time.sleep(LOAD_SECONDS)
    observer_stop.set()
    observer.join(10)
    with ledger.lock:
        snapshot = set(ledger.snapshot)
        snapshots = ledger.snapshots

    crashing.set()
    cluster.kill_immediate()  # pg_ctl stop -m immediate, load still running
    stop.set()
    for t in threads:
        t.join(15)
    assert not any(t.is_alive() for t in threads), "a client hung after the crash"
    assert not ledger.unexpected, ledger.unexpected
    assert snapshots > 0 and ledger.deliveries > 0 and ledger.completed, "no load ran"
    assert ledger.completed_by_workers > 0, "no worker loop completed anything"

    cluster.start()  # crash recovery
    conn = psycopg.connect(dsn, autocommit=True)
    with conn:
        rows = conn.execute(
            "SELECT m.id, m.content, m.is_locked, m.num_attempts, m.dequeue_at "
            "FROM lonnymq.message AS m"
        ).fetchall()
        table = {r[0]: r for r in rows}
        after = set(table)
        created = set(ledger.created)
        done = ledger.completed | ledger.maybe_completed

        # nothing acknowledged is lost
        lost = created - after - done
        assert not lost, f"{len(lost)} acknowledged messages vanished without a completion: {sorted(lost)[:20]}"
        # every acknowledged completion stays done
        back = ledger.completed & after
        assert not back, f"{len(back)} acknowledged completions came back: {sorted(back)[:20]}"
        # nothing uncommitted appears
        phantom = after - created - ledger.maybe_created
        assert not phantom, f"{len(phantom)} messages that were never committed exist: {sorted(phantom)[:20]}"
        assert not (ledger.aborted_created & after), "a rolled-back create survived the crash"
        # what an observer saw committed before the crash is still there, unless completed
        gone = snapshot - after - done
        assert not gone, f"{len(gone)} committed messages disappeared: {sorted(gone)[:20]}"
        # contents intact
        for mid, content in ledger.created.items():
            if mid in table:
                assert bytes(table[mid][1]) == content, f"message {mid} changed its content"

        # the limit counters agree with the messages
        for ch in ("conc", "size"):
            _assert_counters_consistent(conn, ch)
        assert _counters(conn, "conc")["num_admitted"] <= CONC_LIMIT
        assert _counters(conn, "conc")["locked"] <= CONC_LIMIT
        assert _counters(conn, "size")["held"] <= SIZE_LIMIT

        # the marks survived the crash: nothing below them (the sequences are
        # WAL-logged ahead of what a raise read)
        assert_nothing_below_the_marks(conn, "after crash recovery")

        locked_at_crash = {r[0]: (r[3], r[4]) for r in rows if r[2]}
        attempts_before = {r[0]: r[3] for r in rows}
        crash_now = scalar(conn, NOW_MS)
        unexpired = sum(1 for _, expiry in locked_at_crash.values() if expiry > crash_now)

        # the queue works without repair: new messages in every channel
        new_ids = []
        for ch in CHANNELS:
            held = _counters(conn, ch)["held"]
            mid = scalar(conn, "SELECT lonnymq.message_create(%s, 'after the crash')", (ch,))
            if ch == "size" and held >= SIZE_LIMIT:
                assert mid is None, "max_size not enforced after the crash"
            else:
                assert mid is not None, f"create in {ch} refused after the crash"
                new_ids.append(mid)
        assert min(new_ids) > max(created), "a message id was reused after the crash"

        # everything is delivered, locks taken before the crash only once expired
        last_expiry = max([e for _, e in locked_at_crash.values()], default=crash_now)
        deadline = time.monotonic() + max(0, last_expiry - crash_now) / 1000 + 10
        delivered = _drain(conn, 30_000, locked_at_crash, attempts_before, deadline)
        assert set(delivered) == after | set(new_ids)
        assert_nothing_below_the_marks(conn, "after the drain that followed the crash")
        recovered = {mid for mid, (_, rec) in delivered.items() if rec}
        assert recovered == set(locked_at_crash)

        # the counters still agree, and the limits work exactly
        for ch in ("conc", "size"):
            c = _assert_counters_consistent(conn, ch)
            assert c["locked"] == 0 and c["held"] == 0
        accepted = conn.execute(
            "SELECT count(lonnymq.message_create('size', 'refill')) FROM generate_series(1, %s)",
            (SIZE_LIMIT + 1,),
        ).fetchone()[0]
        assert accepted == SIZE_LIMIT, f"max_size channel accepted {accepted} of {SIZE_LIMIT + 1} after draining"
        conn.execute("SELECT lonnymq.message_create('conc', 'c') FROM generate_series(1, 5)")
        got = dequeue(conn, 30000, limit=10, channel="conc", columns="channel")
        assert len(got) == CONC_LIMIT

    print(
        f"\ncrash under load: {len(created)} acked creates ({len(ledger.maybe_created)} maybe, "
        f"{len(ledger.aborted_created)} rolled back), {len(ledger.completed)} acked completes "
        f"({len(ledger.maybe_completed)} maybe), {ledger.deliveries} deliveries "
        f"({ledger.recovered} recovered) before the crash; after restart {len(after)} messages, "
        f"{len(locked_at_crash)} locked ({unexpired} unexpired), all recovered; "
        f"{len(created & after)} acked creates checked present, {len(ledger.completed)} completes checked gone"
    )
