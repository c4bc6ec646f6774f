"""Dependencies (0.16.0, doc/dependencies.md) across real connections: a
dependent linked to a parent while a worker completes that parent is never
left waiting, at READ COMMITTED and at REPEATABLE READ, and workers that
complete the parents of shared dependents at once neither deadlock nor
release a dependent twice.  The invariant (lonnymq_dev/invariants.py,
waiting_stuck: every waiting message's counts are exactly its pending
edges) is checked after each, as after every test."""

from __future__ import annotations

import random
import threading
import time

import psycopg
import pytest

from lonnymq_dev.invariants import assert_nothing_below_the_marks


def one(conn, sql, params=()):
    return conn.execute(sql, params).fetchone()[0]


def status(conn, mid: int) -> str:
    return one(conn, "SELECT status FROM lonnymq.message_status(%s)", (mid,))


def take(conn, channel: str) -> tuple[int, int]:
    return conn.execute(
        "SELECT d.id, d.num_attempts FROM lonnymq.message_dequeue(60000, 1, %s) AS d", (channel,)).fetchone()


def test_a_completion_under_repeatable_read_releases_through_the_release_row(db):
    """A completion whose snapshot may predate a dependent's producer does
    not resolve the dependents itself: it leaves a release row, and the next
    dequeue's promotion (any channel's) releases them."""
    conn = db.connect()
    parent = one(conn, "SELECT lonnymq.message_create('p', 'parent')")
    child = one(conn, "SELECT lonnymq.message_create('c', 'child', p_after => ARRAY[%s])", (parent,))
    mid, token = take(conn, "p")
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        assert one(conn, "SELECT lonnymq.message_complete(%s, %s)", (mid, token)) is True
    assert status(conn, child) == "waiting", "a REPEATABLE READ completion leaves its dependents to its release row"
    assert one(conn, "SELECT count(*) FROM lonnymq.message WHERE id = %s AND schedule = ''", (parent,)) == 1
    assert_nothing_below_the_marks(conn, "after the completion")
    assert take(conn, "nothing-here") is None
    assert status(conn, child) == "ready", "the next dequeue's promotion releases it"
    assert take(conn, "c")[0] == child


@pytest.mark.parametrize("isolation", ["READ COMMITTED", "REPEATABLE READ"])
@pytest.mark.parametrize("first", [True, False], ids=["first dependent", "later dependent"])
def test_a_dependent_linked_while_its_parent_completes_is_released(db, isolation, first):
    """The producer links a dependent to the parent (locking it FOR KEY
    SHARE, and flagging it when it is the first) and holds its transaction
    open; a worker, whose transaction took its snapshot before, completes
    the parent: the completion waits for the producer, then the dependent is
    released, at once (READ COMMITTED) or by the next promotion (REPEATABLE
    READ), or the completion fails with 40001 and, retried, releases it."""
    producer = db.connect(autocommit=False)
    worker = db.connect(autocommit=False)
    admin = db.connect()
    parent = one(admin, "SELECT lonnymq.message_create('p', 'parent')")
    if not first:
        one(admin, "SELECT lonnymq.message_create('c', 'earlier', p_after => ARRAY[%s])", (parent,))
    mid, token = take(admin, "p")
    child = one(producer, "SELECT lonnymq.message_create('c', 'child', p_after => ARRAY[%s])", (parent,))
    worker.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
    worker.execute("SELECT 1")  # the worker's snapshot, before the producer commits
    result: dict = {}

    def complete():
        try:
            result["done"] = one(worker, "SELECT lonnymq.message_complete(%s, %s)", (mid, token))
            worker.commit()
        except psycopg.errors.SerializationFailure:
            worker.rollback()
            result["retried"] = True
            result["done"] = one(worker, "SELECT lonnymq.message_complete(%s, %s)", (mid, token))
            worker.commit()

    thread = threading.Thread(target=complete)
    thread.start()
    thread.join(0.5)
    assert thread.is_alive(), "the completion waits for the producer's lock on the parent"
    producer.commit()
    thread.join(30)
    assert not thread.is_alive()
    assert result["done"] is True
    if isolation == "READ COMMITTED":
        assert status(admin, child) == "ready", "released by the completion itself"
    admin.execute("SELECT lonnymq.tick()")
    assert status(admin, child) == "ready"
    assert_nothing_below_the_marks(admin, "after the race")


def test_workers_completing_shared_parents_at_once_neither_deadlock_nor_release_twice(db):
    """4 workers complete, in random batches, 400 parents shared by 20
    dependents (each waits for 100 of them: buckets), all due at once: no
    40P01, and no dependent released before its last parent completed (a
    watcher reads every released one's parents while they run), nor left
    waiting (the prototype deadlocked 596 times in 3 runs with two
    count-downs per transaction)."""
    conn = db.connect()
    parents = [r[0] for r in conn.execute(
        "SELECT i FROM lonnymq.message_create_batch('p', array_fill('x'::bytea, ARRAY[400])) AS i")]
    rng = random.Random(41)
    children = {}
    for k in range(20):
        mine = sorted(rng.sample(parents, 100))
        children[one(conn, "SELECT lonnymq.message_create('c', %s, p_after => %s)", (f"c{k}".encode(), mine))] = mine
    conn.execute("CREATE TABLE waits (child bigint, parent bigint)")
    with conn.cursor().copy("COPY waits FROM STDIN") as copy:
        for child, mine in children.items():
            for parent in mine:
                copy.write_row((child, parent))
    errors: list[BaseException] = []
    early: list[int] = []
    stop = threading.Event()

    def monitor():
        # A dependent seen released while one of its parents is still in
        # the queue was released early (a count-down counted twice): in one
        # snapshot, a release's commit follows every parent's completion.
        with db.connect() as m:
            while not stop.is_set():
                early.extend(r[0] for r in m.execute(
                    "SELECT DISTINCT w.child FROM waits AS w"
                    " JOIN lonnymq.message AS c ON c.id = w.child AND c.dequeue_at < 2305843009213693952"
                    " JOIN lonnymq.message AS p ON p.id = w.parent AND p.schedule IS NULL"))

    def worker(seed: int):
        local = random.Random(seed)
        with db.connect() as w:
            done: list[tuple[int, int]] = []
            while True:
                try:
                    rows = w.execute(
                        "SELECT d.id, d.num_attempts FROM lonnymq.message_complete_dequeue("
                        "%s::bigint[], %s::integer[], 60000, %s, 'p') AS d",
                        ([d[0] for d in done], [d[1] for d in done], local.randint(1, 8))).fetchall()
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)
                    return
                if not rows and not done:
                    return
                done = rows

    watcher = threading.Thread(target=monitor)
    watcher.start()
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    watcher.join(30)
    assert not errors, errors[:3]
    assert not early, f"dependents released while a parent was still in the queue: {sorted(set(early))}"
    assert one(conn, "SELECT count(*) FROM lonnymq.message WHERE channel = 'p'") == 0
    conn.execute("SELECT lonnymq.tick()")
    assert [status(conn, c) for c in children] == ["ready"] * 20
    assert one(conn, "SELECT count(*) FROM lonnymq.message_edge") == 0
    assert one(conn, "SELECT count(*) FROM lonnymq.message_wait") == 0
    # Each one delivered once, and nothing else.
    got = sorted(r[0] for r in conn.execute("SELECT d.id FROM lonnymq.message_dequeue(60000, 100, 'c') AS d"))
    assert got == sorted(children)
    assert_nothing_below_the_marks(conn)


# Issue 41, item 5: a 3-level DAG of 10,000 messages over 16 channels, 8
# workers with random failures and lock expiries.
DAG_CHANNELS = 16
DAG_ROOTS, DAG_MIDDLE, DAG_SINKS = 100, 9800, 100
FAIL_RATE, ABANDON_RATE = 0.05, 0.03  # of deliveries: message_fail (a retry), or left to expire
DAG_LOCK_MS = 300


@pytest.mark.slow
def test_a_3_level_dag_of_10000_messages_runs_each_once_after_its_parents(db):
    """100 roots; 9,800 messages each waiting for 2 random roots (so each
    root has about 196 dependents: released 100 in its completing call, the
    rest through its release row); 100 sinks each waiting for 98 of those
    (buckets: more than 64 parents).  One transaction creates it, parents
    first, in 16 channels that retry at once.  8 workers take 1 to 4 at a
    time and, per delivery, fail it (5 %), leave its 300 ms lock to expire
    (3 %) or complete it.  From the workers' own records: every message's
    completion succeeded exactly once, and every delivery of a message
    started after each of its parents' successful completions had been
    issued (its release can only follow that commit)."""
    rng = random.Random(4105)
    conn = db.connect()
    for k in range(DAG_CHANNELS):
        conn.execute("SELECT lonnymq.channel_set(%s, p_backoff_base_ms => 0)", (f"dag-{k}",))
    parents: dict[int, list[int]] = {}
    with conn.transaction():
        def create(label: str, after: list[int] | None) -> int:
            return one(conn, "SELECT lonnymq.message_create(%s, %s, p_after => %s)",
                       (f"dag-{rng.randrange(DAG_CHANNELS)}", label.encode(), after))
        roots = [create(f"root {i}", None) for i in range(DAG_ROOTS)]
        middle = []
        for i in range(DAG_MIDDLE):
            mine = rng.sample(roots, 2)
            middle.append(create(f"middle {i}", mine))
            parents[middle[-1]] = mine
        per_sink = DAG_MIDDLE // DAG_SINKS
        for i in range(DAG_SINKS):
            mine = middle[i * per_sink:(i + 1) * per_sink]
            parents[create(f"sink {i}", mine)] = mine
    everything = set(roots) | set(parents)
    assert len(everything) == DAG_ROOTS + DAG_MIDDLE + DAG_SINKS
    assert one(conn, "SELECT count(*) FROM lonnymq.message_wait WHERE bucket = -1") == DAG_MIDDLE + DAG_SINKS
    assert_nothing_below_the_marks(conn, "the DAG created")

    lock = threading.Lock()
    issued: dict[int, float] = {}  # id -> when its successful complete was issued
    completed: dict[int, int] = {}  # id -> successful completes
    deliveries: list[tuple[int, float]] = []  # (id, when the delivery returned)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        local = random.Random(seed)
        idle_since = None
        try:
            with db.connect() as w:
                while True:
                    rows = w.execute("SELECT d.id, d.num_attempts FROM lonnymq.message_dequeue(%s, %s) AS d",
                                     (DAG_LOCK_MS, local.randint(1, 4))).fetchall()
                    now = time.monotonic()
                    if not rows:
                        with lock:
                            if len(completed) == len(everything):
                                return
                        idle_since = idle_since or now
                        assert now - idle_since < 60, "nothing delivered for a minute: a message waits for ever"
                        time.sleep(0.02)
                        continue
                    idle_since = None
                    with lock:
                        deliveries.extend((mid, now) for mid, _ in rows)
                    for mid, token in rows:
                        roll = local.random()
                        if roll < FAIL_RATE:
                            w.execute("SELECT lonnymq.message_fail(%s, %s, 'random failure')", (mid, token))
                        elif roll < FAIL_RATE + ABANDON_RATE:
                            pass  # its lock expires; a later dequeue recovers it
                        else:
                            at = time.monotonic()
                            if one(w, "SELECT lonnymq.message_complete(%s, %s)", (mid, token)):
                                with lock:
                                    issued[mid] = at
                                    completed[mid] = completed.get(mid, 0) + 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors[:3]
    # Failures and expired locks happened: about 8 % of deliveries were not completed.
    assert len(deliveries) > len(everything) * 1.04, len(deliveries)
    assert set(completed) == everything, f"{len(everything - set(completed))} never completed"
    assert [m for m, n in completed.items() if n != 1] == [], "a message completed more than once"
    early = [(mid, p) for mid, at in deliveries for p in parents.get(mid, ()) if at < issued[p]]
    assert early == [], f"{len(early)} deliveries before a parent's completion was issued: {early[:5]}"
    assert one(conn, "SELECT count(*) FROM lonnymq.message") == 0
    assert one(conn, "SELECT count(*) FROM lonnymq.message_edge") == 0
    assert one(conn, "SELECT count(*) FROM lonnymq.message_wait") == 0
    assert_nothing_below_the_marks(conn, "the DAG run")
