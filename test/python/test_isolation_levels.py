"""Nothing stranded, at any isolation level (issue 38).

Workers and producers may run at READ COMMITTED, REPEATABLE READ or
SERIALIZABLE (an application may set default_transaction_isolation for every
session).  A raise of the marks must never pass a committed message, whatever
the isolation level of the raising call and of the writers around it; 0.11.0
to 0.13.0 read the first ready position and the first due entry with the
raising transaction's snapshot, which at REPEATABLE READ or SERIALIZABLE is
older than the epoch it checked: a writer that committed in between was
invisible to it, and its message was left below the mark for ever.

* the two interleavings that stranded a message, replayed step by step;
* workers and producers at each of the three levels and mixed, drained with
  READ COMMITTED dequeues only (no tick(), no pause): every committed
  message delivered, exactly once where completed.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from psycopg import errors

from lonnymq_dev.calls import dequeue
from lonnymq_dev.invariants import assert_nothing_below_the_marks, below_the_marks, marks

ISOLATIONS = ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"]
FILLER = ("SELECT lonnymq.message_create_batch('filler', array_agg(convert_to(g::text, 'UTF8')))"
          " FROM generate_series(1, 200) AS g")


@pytest.mark.parametrize("producer_isolation", ["READ COMMITTED", "SERIALIZABLE"])
@pytest.mark.parametrize("raiser_isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_a_raise_from_an_older_snapshot_leaves_no_message_below_the_marks(db, producer_isolation,
                                                                          raiser_isolation):
    """Issue 38's interleaving: a producer's transaction (S2) spans a raise
    (S1's dequeue of 16), and a REPEATABLE READ or SERIALIZABLE consumer (S3)
    takes its snapshot before S2 commits and raises after.  S2's message is
    a ready one (READ COMMITTED) or one waiting for its place (SERIALIZABLE);
    READ COMMITTED dequeues must deliver it, with no tick() and no pause."""
    s1, s2, s3 = db.connect(), db.connect(), db.connect()  # BEGIN and COMMIT sent as written
    s1.execute(FILLER)
    s2.execute(f"BEGIN ISOLATION LEVEL {producer_isolation}")
    victim = s2.execute("SELECT lonnymq.message_create('victim', 'v')").fetchone()[0]
    time.sleep(0.3)  # the epoch's clock moves past the victim's
    assert len(dequeue(s1, 30_000, limit=16, channel="filler")) == 16  # a take of 16 raises
    s3.execute(f"BEGIN ISOLATION LEVEL {raiser_isolation}")
    s3.execute("SELECT 1")  # its snapshot: before the victim commits
    s2.execute("COMMIT")
    assert len(dequeue(s3, 30_000, limit=16, channel="filler")) == 16
    s3.execute("COMMIT")
    assert_nothing_below_the_marks(s1, "after the raise from the older snapshot")
    got = dequeue(s1, 30_000, limit=5, channel="victim")
    assert [row[0] for row in got] == [victim], "the committed message was never delivered"


def test_a_raise_at_repeatable_read_still_raises_the_marks(db):
    """The fix must not simply stop the raise at REPEATABLE READ: an
    application whose every session runs there would then keep its marks
    where they are, and every probe would walk what was consumed since."""
    conn = db.connect()
    conn.execute("SELECT count(*) FROM lonnymq.message_create_batch('a', array_fill('m'::bytea, ARRAY[2000]))")
    first_mark = marks(conn)[0]
    for _ in range(60):
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        rows = dequeue(conn, 30_000, limit=16)
        conn.execute("SELECT lonnymq.message_complete_batch(%s, %s)",
                     ([r[0] for r in rows], [r[1] for r in rows]))
        conn.execute("COMMIT")
    mark = marks(conn)[0]
    front = conn.execute("SELECT min(position) FROM lonnymq.message").fetchone()[0]
    assert mark > first_mark, "REPEATABLE READ dequeues never raised the position mark"
    assert front - mark < 64 * 2**20, f"the mark stayed {(front - mark) >> 20} rounds behind the front"
    assert_nothing_below_the_marks(conn)


def _run_mixed_load(db, producer_levels, worker_levels, admin_level, seconds: float = 6.0):
    """Producers (one and two creates per transaction, some priority, some
    scheduled a little ahead), workers (dequeues of 1 to 16, some locks
    abandoned to expire) and an administrator (pausing and resuming
    channels, setting and lifting a concurrency limit) at the given levels;
    then a drain by READ COMMITTED dequeues only.  Returns (created,
    completed) ids."""
    stop = threading.Event()
    lock = threading.Lock()
    created: list[int] = []
    completed: list[int] = []
    problems: list[str] = []
    changes: list[str] = []  # the administrator's committed calls

    def producer(k: int, level: str) -> None:
        rng = random.Random(k)
        try:
            with db.connect() as conn:
                i = 0
                while not stop.is_set():
                    i += 1
                    try:
                        conn.execute(f"BEGIN ISOLATION LEVEL {level}")
                        ids = [conn.execute("SELECT lonnymq.message_create(%s, 'n')",
                                            (f"c{rng.randrange(8)}",)).fetchone()[0]]
                        if rng.random() < 0.5:
                            time.sleep(rng.random() * 0.02)  # spans a raise now and then
                            at = rng.choice([-i, None, "ahead"])
                            if at == "ahead":
                                ids.append(conn.execute(
                                    "SELECT lonnymq.message_create(%s, 's', lonnymq.to_epoch(clock_timestamp()) + 150)",
                                    (f"c{rng.randrange(8)}",)).fetchone()[0])
                            else:
                                ids.append(conn.execute("SELECT lonnymq.message_create(%s, 'u', %s)",
                                                        (f"c{rng.randrange(8)}", at)).fetchone()[0])
                        conn.execute("COMMIT")
                    except errors.SerializationFailure:
                        conn.execute("ROLLBACK")
                        continue
                    with lock:
                        created.extend(ids)
        except BaseException as exc:  # noqa: BLE001
            problems.append(f"producer {k} ({level}): {exc!r}")

    def worker(k: int, level: str) -> None:
        rng = random.Random(100 + k)
        try:
            with db.connect() as conn:
                n = 0
                while not stop.is_set():
                    n += 1
                    abandon = n % 13 == 0
                    try:
                        conn.execute(f"BEGIN ISOLATION LEVEL {level}")
                        if rng.random() < 0.5:
                            conn.execute("SELECT 1")  # a snapshot taken before the dequeue
                            time.sleep(rng.random() * 0.01)
                        rows = dequeue(conn, 200 if abandon else 3_000, limit=rng.choice([1, 4, 16]))
                        conn.execute("COMMIT")
                    except errors.SerializationFailure:
                        conn.execute("ROLLBACK")
                        continue
                    if abandon:
                        continue  # the locks expire; a dequeue recovers them
                    for mid, token in rows:
                        conn.execute(f"BEGIN ISOLATION LEVEL {level}")
                        try:
                            ok = conn.execute("SELECT lonnymq.message_complete(%s, %s)", (mid, token)).fetchone()[0]
                            conn.execute("COMMIT")
                        except errors.SerializationFailure:
                            conn.execute("ROLLBACK")
                            continue  # its lock expires (3 s); it is delivered again
                        if ok:
                            with lock:
                                completed.append(mid)
                    if not rows:
                        time.sleep(0.005)
        except BaseException as exc:  # noqa: BLE001
            problems.append(f"worker {k} ({level}): {exc!r}")

    def admin(level: str) -> None:
        rng = random.Random(7)
        calls = ["SELECT lonnymq.channel_pause(%s)", "SELECT lonnymq.channel_resume(%s)",
                 "SELECT lonnymq.channel_set(%s, p_max_concurrency => 2)", "SELECT lonnymq.channel_set(%s)"]
        try:
            with db.connect() as conn:
                conn.execute("SET lock_timeout = '2s'")
                while not stop.is_set():
                    try:
                        conn.execute(f"BEGIN ISOLATION LEVEL {level}")
                        call = rng.choice(calls)
                        conn.execute(call, (f"c{rng.randrange(8)}",))
                        conn.execute("COMMIT")
                        changes.append(call)
                    except (errors.SerializationFailure, errors.LockNotAvailable, errors.DeadlockDetected):
                        conn.execute("ROLLBACK")
                    time.sleep(0.05)
                for k in range(8):  # what the drain needs: every channel resumed, no limit
                    conn.execute("SELECT lonnymq.channel_resume(%s)", (f"c{k}",))
                    conn.execute("SELECT lonnymq.channel_set(%s)", (f"c{k}",))
        except BaseException as exc:  # noqa: BLE001
            problems.append(f"admin ({level}): {exc!r}")

    threads = [threading.Thread(target=producer, args=(k, lvl)) for k, lvl in enumerate(producer_levels)]
    threads.append(threading.Thread(target=admin, args=(admin_level,)))
    threads += [threading.Thread(target=worker, args=(k, lvl)) for k, lvl in enumerate(worker_levels)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(60)
    assert not problems, problems[:5]
    assert len(set(changes)) == 4 and len(changes) >= 20, f"the administrator changed little: {len(changes)} calls"
    with db.connect() as drain:
        assert_nothing_below_the_marks(drain, "after the load")
        deadline = time.monotonic() + 30
        while drain.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0]:
            assert time.monotonic() < deadline, (
                f"messages are stuck: {drain.execute('SELECT id, position, is_locked, dequeue_at FROM lonnymq.message LIMIT 5').fetchall()}"
                f", marks {below_the_marks(drain)}")
            rows = dequeue(drain, 60_000, limit=100)
            for mid, token in rows:
                assert drain.execute("SELECT lonnymq.message_complete(%s, %s)", (mid, token)).fetchone()[0]
                completed.append(mid)
            if not rows:
                time.sleep(0.02)
        assert_nothing_below_the_marks(drain, "after the drain")
    return created, completed


MIXES = {  # producers, workers, the administrator
    "read committed": (["READ COMMITTED"] * 3, ["READ COMMITTED"] * 3, "READ COMMITTED"),
    "repeatable read": (["REPEATABLE READ"] * 3, ["REPEATABLE READ"] * 3, "REPEATABLE READ"),
    "serializable": (["SERIALIZABLE"] * 3, ["SERIALIZABLE"] * 3, "SERIALIZABLE"),
    "mixed": (ISOLATIONS, ["REPEATABLE READ", "SERIALIZABLE", "READ COMMITTED"], "REPEATABLE READ"),
}


@pytest.mark.parametrize("mix", list(MIXES))
def test_every_committed_message_is_delivered_at_every_isolation_level(db, mix):
    producers, workers, admin = MIXES[mix]
    created, completed = _run_mixed_load(db, producers, workers, admin)
    assert len(created) >= 100, f"only {len(created)} messages created: no load"
    assert len(completed) == len(set(completed)), "a message was completed twice"
    assert sorted(completed) == sorted(created), (
        f"{len(set(created) - set(completed))} committed message(s) never delivered")
