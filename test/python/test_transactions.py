"""Transactions around the queue calls, with real concurrent connections.

* A rolled-back ``message_create`` (or one rolled back to a savepoint) leaves
  nothing behind: no message, no channel row, no quota used, and the channel
  keeps working.
* A message created in an open transaction is invisible to consumers until
  the commit, and the open transaction blocks no one else (detected with
  ``lock_timeout``).
* A ``message_dequeue`` inside a transaction that rolls back did not happen:
  the message is available again at once (not after the lock time), with the
  same ``num_attempts``, not recovered, and no limit counts it.
* ``message_dequeue`` never waits for another transaction (every row lock
  SKIP LOCKED, doc/message_dequeue.md), so it cannot deadlock with a worker's
  complete either.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from lonnymq_dev.calls import dequeue, dequeue_one, complete

LOCK_TIMEOUT = "2s"

KINDS = {
    # name: channel_set arguments (max_concurrency, max_size, release_interval_ms)
    "unconstrained": None,
    "max_concurrency": (1, None, 0),
    "max_size": (None, 3, 0),
    "release_interval": (None, None, 10_000),
}


def _one(db, sql, params=()):
    """One call on a fresh autocommit connection that refuses to wait for a lock."""
    return db.call(sql, params, lock_timeout=LOCK_TIMEOUT)


def _dequeue(db, channel=None, limit=10, lock_ms=60_000):
    return _one(db, "SELECT id, convert_from(content, 'UTF8'), num_attempts, is_recovered, dequeue_at"
                    " FROM lonnymq.message_dequeue(%s, %s, %s)", (lock_ms, limit, channel))


def _channel_state(db, name):
    """The channel's row (its admission and quota counters; none for a channel
    without configuration) and the delivery state of its messages."""
    channel = _one(db, "SELECT c.num_admitted, c.num_pending, c.release_at, c.num_removed, q.num_created"
                       " FROM lonnymq.channel AS c LEFT JOIN lonnymq.channel_quota AS q ON q.channel_id = c.id"
                       " WHERE c.name = %s", (name,))
    messages = _one(db, "SELECT id, position, is_held, is_admitted, is_locked, dequeue_at, num_attempts"
                        " FROM lonnymq.message WHERE channel = %s ORDER BY id", (name,))
    return channel, messages


def _ghosts(db):
    return _one(db, "SELECT count(*) FROM lonnymq.message WHERE convert_from(content, 'UTF8') LIKE 'ghost%%'")[0][0]


# ------------------------------------------------------------ rolled-back create

def _consume(db, channel=None):
    """Dequeue what is ready and complete it at once; return the contents."""
    got = _dequeue(db, channel)
    for r in got:
        assert _one(db, "SELECT lonnymq.message_complete(%s, %s)", (r[0], r[2])) == [(True,)]
    return [r[1] for r in got]


def _counters_agree(db, name):
    """The channel's counters match its messages: admission (num_admitted, and
    num_pending with a release interval; every lock of a channel with
    max_concurrency is admitted, and never more than it allows) and the quota
    of a max_size channel."""
    rows = _one(db, "SELECT c.max_concurrency, c.release_interval_ms, c.num_admitted, c.num_pending,"
                    " q.num_created - c.num_removed,"
                    " (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel_id = c.id AND m.is_admitted),"
                    " (SELECT count(*) FROM lonnymq.message AS m"
                    "   WHERE m.channel_id = c.id AND m.is_admitted AND (NOT m.is_locked OR m.position IS NOT NULL)),"
                    " (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel_id = c.id AND m.is_locked),"
                    " (SELECT count(*) FROM lonnymq.message AS m WHERE m.channel_id = c.id)"
                    " FROM lonnymq.channel AS c LEFT JOIN lonnymq.channel_quota AS q ON q.channel_id = c.id"
                    " WHERE c.name = %s", (name,))
    for max_concurrency, interval, num_admitted, num_pending, held_by_quota, admitted, pending, locked, held in rows:
        if max_concurrency is not None or interval > 0:
            assert num_admitted == admitted, f"{name}: num_admitted {num_admitted}, {admitted} messages admitted"
        if max_concurrency is not None:
            assert admitted <= max_concurrency, f"{name}: {admitted} admitted, max_concurrency {max_concurrency}"
            assert locked <= admitted, f"{name}: {locked} locked, only {admitted} admitted"
        if interval > 0:
            assert num_pending == pending <= 1, f"{name}: num_pending {num_pending}, {pending} admitted undelivered"
        if held_by_quota is not None:
            assert held_by_quota == held, f"{name}: the quota counts {held_by_quota} messages, {held} exist"


@pytest.mark.parametrize("state", ["new", "idle", "busy", "max_size"])
@pytest.mark.parametrize("how", ["rollback", "savepoint"])
def test_a_rolled_back_create_leaves_nothing(db, state, how):
    if state == "idle":
        _one(db, "SELECT lonnymq.message_create('a', 'a0')")
        # (a 1 ms lock: the channel waits for its expiry, then is found empty)
        got = _dequeue(db, "a", lock_ms=1)
        assert [r[1] for r in got] == ["a0"]
        _one(db, "SELECT lonnymq.message_complete(%s, %s)", (got[0][0], got[0][2]))
        time.sleep(0.01)
        assert _dequeue(db, "a") == []          # the consumer finds it empty
        assert _channel_state(db, "a") == ([], []), "an empty channel without configuration leaves nothing"
    elif state == "busy":
        _one(db, "SELECT lonnymq.message_create('a', 'a0')")
    elif state == "max_size":
        _one(db, "SELECT lonnymq.channel_set('a', p_max_size => 4)")
        _one(db, "SELECT lonnymq.message_create('a', 'a0')")

    producer = db.connect(autocommit=False)
    producer.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
    if how == "savepoint":
        producer.execute("SELECT lonnymq.message_create('other', 'kept')")
        producer.execute("SAVEPOINT s")
    ids = producer.execute(
        "SELECT lonnymq.message_create('a', 'ghost now'),"
        " lonnymq.message_create('a', 'ghost soon', lonnymq.to_epoch(clock_timestamp()) + 200),"
        " lonnymq.message_create('a', 'ghost urgent', 0)").fetchone()
    assert all(i is not None for i in ids)
    # consumers look while the producer is in flight: nothing of it to see
    seen = _consume(db, "a") + _consume(db)
    if how == "savepoint":
        producer.execute("ROLLBACK TO SAVEPOINT s")
        producer.commit()
    else:
        producer.rollback()
    producer.close()

    assert _ghosts(db) == 0
    assert _one(db, "SELECT count(*) FROM lonnymq.message WHERE id = ANY(%s)", (list(ids),)) == [(0,)]
    if state == "new":
        assert _one(db, "SELECT count(*) FROM lonnymq.channel WHERE name = 'a'") == [(0,)], \
            "the channel created by the rolled-back transaction exists"
    _counters_agree(db, "a")

    # nothing is ever delivered for it, also after its scheduled time has passed
    time.sleep(0.25)
    for _ in range(3):
        seen += _consume(db, "a") + _consume(db)
    assert [c for c in seen if c.startswith("ghost")] == []
    if state in ("busy", "max_size"):
        assert "a0" in seen
    if how == "savepoint":
        assert "kept" in seen, "the committed part of the transaction was lost"
    _counters_agree(db, "a")

    if state == "max_size":
        # the rolled-back creates used no quota: the channel is empty, 4 fit, the 5th is dropped
        made = [_one(db, "SELECT lonnymq.message_create('a', 'fill')")[0][0] for _ in range(5)]
        assert [m is not None for m in made] == [True, True, True, True, False]
        assert _consume(db, "a") == ["fill"] * 4
    else:
        # an empty channel without configuration leaves nothing behind (no stray state)
        _dequeue(db, "a")
        assert _channel_state(db, "a") == ([], [])

    # the channel keeps working
    mid = _one(db, "SELECT lonnymq.message_create('a', 'real')")[0][0]
    got = _dequeue(db, "a")
    assert [(r[0], r[1]) for r in got] == [(mid, "real")]
    assert _one(db, "SELECT lonnymq.message_complete(%s, %s)", (got[0][0], got[0][2])) == [(True,)]
    assert _one(db, "SELECT count(*) FROM lonnymq.message") == [(0,)]


# ------------------------------------------------------------ uncommitted create

@pytest.mark.parametrize("kind", list(KINDS))
def test_an_uncommitted_message_is_invisible_and_blocks_no_one(db, kind):
    limits = KINDS[kind]
    if limits:
        _one(db, "SELECT lonnymq.channel_set('a', %s, %s, %s)", limits)
    for name in ("a", "b"):
        _one(db, "SELECT lonnymq.message_create(%s, %s)", (name, f"{name}1".encode()))
        _one(db, "SELECT lonnymq.message_create(%s, %s)", (name, f"{name}2".encode()))
    held = _dequeue(db, "a", limit=1)               # a worker holds a1
    assert [r[1] for r in held] == ["a1"]

    producer = db.connect(autocommit=False)
    producer.execute("SELECT lonnymq.message_create('a', 'ghost')")
    try:
        # invisible to everyone else
        assert _ghosts(db) == 0
        # other producers of the same (existing) channel, and of other channels
        if kind != "max_size":  # documented: producers of a max_size channel serialise on its quota row
            assert _one(db, "SELECT lonnymq.message_create('a', 'a3')")[0][0] is not None
        assert _one(db, "SELECT lonnymq.message_create('b', 'b3')")[0][0] is not None
        assert _one(db, "SELECT lonnymq.message_create('c', 'c1')")[0][0] is not None
        # consumers of other channels, and of any channel
        assert [r[1] for r in _dequeue(db, "b", limit=1)] == ["b1"]
        assert len(_dequeue(db, None, limit=3)) >= 1
        # workers of the same channel: heartbeat, defer, complete
        mid, _content, token = held[0][:3]
        assert _one(db, "SELECT lonnymq.message_heartbeat(%s, %s, 60000)", (mid, token)) == [(True,)]
        assert _one(db, "SELECT lonnymq.message_defer(%s, %s, 0)", (mid, token)) == [(True,)]
        # consumers of the same channel get its committed messages, never the uncommitted one
        seen = []
        for _ in range(4):
            seen += _consume(db, "a")
        assert "ghost" not in seen
        if kind == "release_interval":
            assert seen == []                          # delivered a moment ago: the next delivery is 10 s after it
        else:
            assert seen and seen[0] == "a1", seen      # the deferred, prioritised message first
        assert _ghosts(db) == 0
        _counters_agree(db, "a")
    finally:
        producer.commit()
        producer.close()

    # committed: now it is delivered (a rate-limited channel: after its interval, via channel_set)
    if kind == "release_interval":
        _one(db, "SELECT lonnymq.channel_set('a', NULL, NULL, 0)")
    seen = []
    for _ in range(6):
        seen += _consume(db, "a")
    assert "ghost" in seen
    _counters_agree(db, "a")


# ------------------------------------------------------------ rolled-back dequeue

@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("limit", [1, 3])
def test_a_rolled_back_dequeue_makes_the_message_available_at_once(db, kind, limit):
    limits = KINDS[kind]
    if limits:
        _one(db, "SELECT lonnymq.channel_set('a', %s, %s, %s)", limits)
    ids = [_one(db, "SELECT lonnymq.message_create('a', %s)", (f"m{i}".encode(),))[0][0] for i in range(3)]
    _one(db, "SELECT lonnymq.message_create('b', 'b1')")
    created_at = dict(_one(db, "SELECT id, dequeue_at FROM lonnymq.message"))
    before = _channel_state(db, "a")

    worker = db.connect(autocommit=False)
    got = dequeue(worker, 600000, limit=limit, channel="a", columns="id, num_attempts, is_recovered")
    expected = 1 if kind in ("max_concurrency", "release_interval") else limit
    assert [r[0] for r in got] == ids[:expected]
    assert all(r[1] == 1 and not r[2] for r in got)
    worker.rollback()
    rolled_back = time.monotonic()
    worker.close()

    assert _channel_state(db, "a") == before
    # at once, with no wait for the 10-minute lock: the same message, the same attempt count
    again = _one(db, "SELECT id, num_attempts, is_recovered, dequeue_at FROM lonnymq.message_dequeue(600000, %s, 'a')",
                 (limit,))
    assert time.monotonic() - rolled_back < 5
    assert [r[0] for r in again] == ids[:expected], "the message is not available again after the rollback"
    for mid, attempts, recovered, dequeue_at in again:
        assert attempts == 1, "the rolled-back delivery counted an attempt"
        assert recovered is False
        assert dequeue_at == created_at[mid]
    # and the attempt that did happen is the current token
    for mid, attempts, _r, _d in again:
        assert _one(db, "SELECT lonnymq.message_complete(%s, 1)", (mid,)) == [(True,)]


def test_rolled_back_complete_and_defer_leave_the_lock_and_token(db):
    _one(db, "SELECT lonnymq.channel_set('a', 1)")
    _one(db, "SELECT lonnymq.message_create('a', 'm1'), lonnymq.message_create('a', 'm2')")
    mid, _c, token, _r, _d = _dequeue(db, "a", limit=1)[0]

    for call in ("SELECT lonnymq.message_complete(%s, %s)",
                 "SELECT lonnymq.message_defer(%s, %s, 0)",
                 "SELECT lonnymq.message_heartbeat(%s, %s, 1)"):
        with db.connect(autocommit=False) as conn:
            assert conn.execute(call, (mid, token)).fetchone()[0] is True
            conn.rollback()
        # still locked by the same delivery, slot still taken
        assert _one(db, "SELECT is_locked, num_attempts FROM lonnymq.message WHERE id = %s", (mid,)) == [(True, token)]
        assert _dequeue(db, "a") == [], "max_concurrency 1 with the lock still held"
    assert _one(db, "SELECT lonnymq.message_complete(%s, %s)", (mid, token)) == [(True,)]
    assert [r[1] for r in _dequeue(db, "a")] == ["m2"]


def test_a_rolled_back_create_on_an_idle_channel_leaves_nothing(db):
    """The place a producer gives its message in an idle channel goes with its
    transaction (0.4.0 to 0.10.1: its wake-up row): nothing is delivered, no
    channel row is left, and the channel's next message takes the current
    round as if the rolled-back one had never been."""
    _one(db, "SELECT lonnymq.message_create('a', 'a0')")
    # (a 1 ms lock, expired and recovered: the channel is then found empty)
    got = _dequeue(db, "a", lock_ms=1)
    _one(db, "SELECT lonnymq.message_complete(%s, %s)", (got[0][0], got[0][2]))
    time.sleep(0.01)
    assert _dequeue(db, "a") == []
    assert _channel_state(db, "a") == ([], [])
    _one(db, "SELECT lonnymq.message_create('b', convert_to('b' || g, 'UTF8')) FROM generate_series(1, 3) AS g")

    with db.connect(autocommit=False) as producer:
        producer.execute("SELECT lonnymq.message_create('a', 'ghost')")
        ghost_at = producer.execute("SELECT position FROM lonnymq.message WHERE channel = 'a'").fetchone()[0]
        assert ghost_at is not None, "expected the producer to place its message in the round order"
        producer.rollback()
    assert _channel_state(db, "a") == ([], [])
    _one(db, "SELECT lonnymq.message_create('a', 'a1')")
    assert _one(db, "SELECT position FROM lonnymq.message WHERE channel = 'a'") == [(ghost_at,)], \
        "the rolled-back message moved the channel's next place"
    seen = [r[1] for r in _dequeue(db)]
    assert "ghost" not in seen and sorted(seen) == ["a1", "b1", "b2", "b3"]
    assert _dequeue(db) == []


# ------------------------------------------------------------ dequeue never waits

def _worker_that_found_a_empty(db):
    """A worker transaction that dequeued a channel's only message and then, in a second call,
    found the channel with nothing ready (0.10.1: which marked the channel waiting). Still open."""
    worker = db.connect(autocommit=False)
    got = dequeue(worker, channel="a", columns="id, channel")
    assert [r[1] for r in got] == ["a"]
    assert dequeue(worker, channel="a", columns="*") == []
    return worker


def test_a_dequeue_never_waits_for_another_transaction(db):
    """doc/message_dequeue.md (Locks): every row lock is taken with SKIP LOCKED, and
    message_dequeue never waits for another transaction's row lock. Another consumer's open
    transaction must therefore not hold up a dequeue (lock_timeout detects a wait)."""
    _one(db, "SELECT lonnymq.message_create('a', 'a1')")
    worker = _worker_that_found_a_empty(db)
    try:
        try:
            got = _one(db, "SELECT id, channel FROM lonnymq.message_dequeue(60000, 1)")
        except psycopg.errors.LockNotAvailable as exc:
            pytest.fail(f"message_dequeue waited for another transaction's lock: {exc}".replace("\n", " | "),
                        pytrace=False)
        assert got == []
    finally:
        worker.rollback()
        worker.close()


def test_a_dequeue_and_a_complete_do_not_deadlock(db):
    """The same wait, turned into a deadlock: the waiting dequeue holds channel b, which the
    other transaction's message_complete (a max_concurrency channel) then needs."""
    _one(db, "SELECT lonnymq.channel_set('b', 5)")
    _one(db, "SELECT lonnymq.message_create('b', 'b1'), lonnymq.message_create('b', 'b2'),"
             " lonnymq.message_create('a', 'a1')")
    b1 = _one(db, "SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 1, 'b')")[0]
    worker = _worker_that_found_a_empty(db)
    result: dict = {}

    def other_consumer():
        try:
            with db.connect() as conn:
                conn.execute("SET lock_timeout = '20s'")
                result["rows"] = conn.execute(
                    "SELECT id, channel FROM lonnymq.message_dequeue(60000, 2) /* other-consumer */").fetchall()
        except BaseException as exc:  # noqa: BLE001
            result["error"] = exc

    t = threading.Thread(target=other_consumer)
    t.start()
    time.sleep(0.5)
    try:
        worker.execute("SET lock_timeout = '20s'")
        assert complete(worker, *b1) is True
        worker.commit()
    except psycopg.errors.DeadlockDetected as exc:
        worker.rollback()
        result["worker_error"] = exc
    finally:
        worker.close()
        t.join(30)
    errors = {k: v for k, v in result.items() if k != "rows"}
    assert not errors, f"deadlock between a dequeue and a complete: {errors}"


def test_serializable_producers_beside_read_committed_consumers_rarely_fail(db):
    """Issue "Hardening…", item 3: 0.8.0's producers under SERIALIZABLE read a
    channel's pending wake-ups and inserted one, which made every two of them
    a read/write dependency: beside READ COMMITTED consumers 370 of 1,000
    producer transactions failed with 40001 (measured).  0.9.0 inserts the
    wake-up without looking: 3 of 15,929 failed, all racing to create the
    channel (doc/README.md, Isolation level).  Four producers of 300
    transactions each, four consumers; every committed message is delivered."""
    import threading

    from psycopg import errors

    db.connect().execute("SELECT lonnymq.message_create('c', 'first')")
    counts = {"ok": 0, "failed": 0}
    lock = threading.Lock()
    done = threading.Event()

    def producer():
        conn = db.connect(autocommit=False)
        for _ in range(300):
            try:
                conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                conn.execute("SELECT lonnymq.message_create('c', 'x')")
                conn.commit()
                outcome = "ok"
            except errors.SerializationFailure:
                conn.rollback()
                outcome = "failed"
            with lock:
                counts[outcome] += 1

    completed: list[int] = []

    def consumer():
        conn = db.connect()
        while not done.is_set():
            row = dequeue_one(conn, 30000)
            if row:
                assert complete(conn, *row) is True
                with lock:
                    completed.append(row[0])

    producers = [threading.Thread(target=producer) for _ in range(4)]
    consumers = [threading.Thread(target=consumer) for _ in range(4)]
    for t in producers + consumers:
        t.start()
    for t in producers:
        t.join()
    done.set()
    for t in consumers:
        t.join()
    assert counts["ok"] + counts["failed"] == 1200
    assert counts["failed"] <= 12, counts  # at most 1%; 0.8.0: about 37%
    # nothing committed was lost: delivered once, or still in the queue
    left = db.connect().execute("SELECT count(*) FROM lonnymq.message WHERE channel = 'c'").fetchone()[0]
    assert len(completed) == len(set(completed))
    assert len(completed) + left == counts["ok"] + 1, (len(completed), left, counts)
