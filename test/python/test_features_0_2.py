"""0.2.0 features under real concurrency, with real connections.

* Periodic messages: many workers dequeuing at once, no background process:
  each period yields exactly one message.
* Deduplication keys: many producers creating the same keys at once: one
  message per key, every producer told the same id; and a retried producer
  after the first copy was completed (dedup window).
* A message that kills its worker: each killed worker's lock expires; after
  max_attempts deliveries the message is in the dead letters, not looping.
* Notifications: LISTEN lonnymq gets one notification per transaction and
  channel, with the channel name as payload, only for channels with notify.
* Batches with limits: workers completing in batches keep the counters exact.
"""

from __future__ import annotations

import random
import threading
import time

import psycopg
import pytest


def _scalar(conn, sql, params=()):
    return conn.execute(sql, params).fetchone()[0]


def _now_ms(conn) -> int:
    return _scalar(conn, "SELECT lonnymq.to_epoch(clock_timestamp())")


# ------------------------------------------------------------ schedules

def test_each_period_yields_exactly_one_message_with_many_workers(db):
    admin = db.connect()
    every = 200
    start = _now_ms(admin) + 100
    admin.execute("SELECT lonnymq.schedule_set('beat', 'beats', 'tick', %s, %s)", (every, start))
    stop = threading.Event()
    errors: list[BaseException] = []
    delivered: list[int] = []
    lock = threading.Lock()

    def worker():
        try:
            with psycopg.connect(db.dsn, autocommit=True) as conn:
                while not stop.is_set():
                    rows = conn.execute(
                        "SELECT id, num_attempts, dequeue_at FROM lonnymq.message_dequeue(60000, 1, 'beats')"
                    ).fetchall()
                    for mid, token, _ in rows:
                        assert _scalar(conn, "SELECT lonnymq.message_complete(%s, %s)", (mid, token)) is True
                        with lock:
                            delivered.append(mid)
                    if not rows:
                        time.sleep(0.005)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(3.0)
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    end = _now_ms(admin)
    sched = admin.execute(
        "SELECT num_runs, num_missed, next_at FROM lonnymq.schedule WHERE name = 'beat'").fetchone()
    num_runs, num_missed, next_at = sched
    # Boundaries start + k*every that are <= the last materialisation: one
    # message each (workers poll every few ms, far more often than 200 ms).
    assert (next_at - start) % every == 0, "next_at stays aligned to start_at"
    periods = (next_at - start) // every
    assert num_runs + num_missed == periods
    assert num_missed == 0, "workers polled all the time: no period was missed"
    assert len(delivered) == num_runs == len(set(delivered))
    assert periods >= (end - start) // every - 1
    created = admin.execute(
        "SELECT count(*), count(DISTINCT h.dequeue_at) FROM (SELECT unnest(%s::bigint[]) AS id) AS d "
        "LEFT JOIN lonnymq.message AS h ON h.id = d.id", (delivered,)).fetchone()
    assert created[0] == len(delivered)


def test_missed_periods_coalesce_into_one_message(db):
    admin = db.connect()
    now = _now_ms(admin)
    start = now - 10_500  # 10 full periods of 1 s missed, the 11th boundary is now-500
    admin.execute("SELECT lonnymq.schedule_set('late', 'late', 'x', 1000, %s)", (start,))
    assert _scalar(admin, "SELECT lonnymq.tick()") == 1
    rows = admin.execute(
        "SELECT dequeue_at FROM lonnymq.message AS m JOIN lonnymq.channel AS c ON c.id = m.channel_id "
        "WHERE c.name = 'late'").fetchall()
    assert len(rows) == 1
    assert rows[0][0] == start + 10 * 1000, "the message is for the latest missed boundary"
    runs, missed, next_at = admin.execute(
        "SELECT num_runs, num_missed, next_at FROM lonnymq.schedule WHERE name = 'late'").fetchone()
    assert (runs, missed, next_at) == (1, 10, start + 11 * 1000)
    assert _scalar(admin, "SELECT lonnymq.tick()") == 0, "nothing more until the next boundary"


# ------------------------------------------------------------ dedup keys

def test_concurrent_producers_of_the_same_keys_store_one_message_each(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('dedup', p_dedup_window_ms => 60000)")
    keys = [f"order-{i}" for i in range(200)]
    results: list[dict[str, int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def producer(seed: int):
        mine = list(keys)
        random.Random(seed).shuffle(mine)
        got: dict[str, int] = {}
        try:
            with psycopg.connect(db.dsn, autocommit=False) as conn:
                barrier.wait()
                for i in range(0, len(mine), 20):
                    chunk = mine[i:i + 20]
                    told: dict[str, int] = {}
                    if seed % 2:
                        for k in chunk:
                            told[k] = _scalar(conn, "SELECT lonnymq.message_create('dedup', 'x', NULL, %s)", (k,))
                    else:
                        ids = [r[0] for r in conn.execute(
                            "SELECT * FROM lonnymq.message_create_batch('dedup', %s, NULL, %s)",
                            ([b"x"] * len(chunk), chunk)).fetchall()]
                        told.update(zip(chunk, ids))
                    conn.commit()
                    got.update(told)  # what a committed transaction was told
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        results.append(got)

    threads = [threading.Thread(target=producer, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # Two producers claiming keys in different orders can deadlock (40P01)
    # or, under load, need a retry; neither may create a duplicate.
    retryable = [e for e in errors if getattr(e, "sqlstate", None) in ("40P01", "40001")]
    assert len(retryable) == len(errors), errors
    stored = dict(admin.execute(
        "SELECT m.key, m.id FROM lonnymq.message AS m JOIN lonnymq.channel AS c ON c.id = m.channel_id "
        "WHERE c.name = 'dedup'").fetchall())
    assert sorted(stored) == sorted(keys), "one message per key"
    for got in results:
        for k, mid in got.items():
            assert mid == stored[k], f"producer told {mid} for {k}, stored {stored[k]}"


def test_a_retried_producer_after_completion_gets_the_first_id(db):
    conn = db.connect()
    conn.execute("SELECT lonnymq.channel_set('win', p_dedup_window_ms => 600000)")
    first = _scalar(conn, "SELECT lonnymq.message_create('win', 'a', NULL, 'k')")
    mid, token = conn.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 1, 'win')").fetchone()
    assert mid == first
    assert _scalar(conn, "SELECT lonnymq.message_complete(%s, %s)", (mid, token)) is True
    assert _scalar(conn, "SELECT lonnymq.message_create('win', 'a', NULL, 'k')") == first
    assert _scalar(conn, "SELECT count(*) FROM lonnymq.message") == 0, "the retry stored nothing"
    # Once the window is over, the key is free again.
    conn.execute("UPDATE lonnymq.message_key SET expires_at = 0")
    assert _scalar(conn, "SELECT lonnymq.message_create('win', 'a', NULL, 'k')") != first


# ------------------------------------------------------------ poison

def _kill_worker_holding(db, admin, channel: str, lock_ms: int) -> tuple[int, int]:
    worker = psycopg.connect(db.dsn, autocommit=True)
    pid = worker.info.backend_pid
    row = worker.execute(
        "SELECT id, num_attempts FROM lonnymq.message_dequeue(%s, 1, %s)", (lock_ms, channel)).fetchone()
    assert row is not None
    assert _scalar(admin, "SELECT pg_terminate_backend(%s, 5000)", (pid,)) is True
    try:
        worker.close()
    except Exception:  # noqa: BLE001
        pass
    return row


def test_a_message_that_kills_its_workers_ends_in_the_dead_letters(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('poison', p_max_attempts => 2, p_max_concurrency => 4)")
    mid = _scalar(admin, "SELECT lonnymq.message_create('poison', 'kills workers')")
    assert _kill_worker_holding(db, admin, "poison", 300) == (mid, 1)
    time.sleep(0.4)
    # Redelivered once (attempt 2 of 2), and that worker's lock expires too.
    row = admin.execute("SELECT id, num_attempts, is_recovered FROM lonnymq.message_dequeue(1, 1, 'poison')").fetchone()
    assert row == (mid, 2, True)
    time.sleep(0.05)
    good = _scalar(admin, "SELECT lonnymq.message_create('poison', 'fine')")
    # Its lock expired after its last attempt: the next dequeue buries it and
    # delivers the next message instead.
    row = admin.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 1, 'poison')").fetchone()
    assert row == (good, 1)
    dead = admin.execute(
        "SELECT num_attempts, last_error, attempt_log FROM lonnymq.dead_letter WHERE id = %s", (mid,)).fetchone()
    assert dead is not None
    assert dead[0] == 2 and dead[1] == "lock expired"
    assert [e["error"] for e in dead[2]] == ["lock expired", "lock expired"]
    assert [e["attempt"] for e in dead[2]] == [1, 2]
    num_locked = _scalar(admin, "SELECT num_locked FROM lonnymq.channel WHERE name = 'poison'")
    assert num_locked == 1, "only the good message is locked"
    assert _scalar(admin, "SELECT dead FROM lonnymq.channel_stats WHERE channel = 'poison'") == 1


# ------------------------------------------------------------ notifications

def test_notifications_one_per_transaction_and_channel(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('loud', p_notify => true)")
    admin.execute("SELECT lonnymq.channel_set('quiet')")
    listener = db.connect()
    listener.execute("LISTEN lonnymq")
    producer = db.connect(autocommit=False)
    for _ in range(5):
        producer.execute("SELECT lonnymq.message_create('loud', 'x')")
    producer.execute("SELECT lonnymq.message_create_batch('loud', ARRAY['a', 'b']::bytea[])")
    producer.execute("SELECT lonnymq.message_create('quiet', 'x')")
    producer.execute("SELECT lonnymq.message_create('loud', 'later', lonnymq.to_epoch(now()) + 3600000)")
    producer.commit()
    got = [(n.channel, n.payload) for n in listener.notifies(timeout=1.0)]
    assert got == [("lonnymq", "loud")]
    # A future-dated message alone notifies nothing; a defer to now does.
    producer.execute("SELECT lonnymq.message_create('loud', 'later', lonnymq.to_epoch(now()) + 3600000)")
    producer.commit()
    assert list(listener.notifies(timeout=0.5)) == []
    mid, token = admin.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 1, 'loud')").fetchone()
    admin.execute("SELECT lonnymq.message_defer(%s, %s)", (mid, token))
    assert [n.payload for n in listener.notifies(timeout=1.0)] == ["loud"]
    # Nothing is sent for a transaction that rolls back.
    producer.execute("SELECT lonnymq.message_create('loud', 'x')")
    producer.rollback()
    assert list(listener.notifies(timeout=0.5)) == []


def test_notification_payload_can_hide_the_channel_name(db):
    """0.9.0: PostgreSQL has no access control on LISTEN, so a role with no
    grants receives every payload; a channel may send its id or nothing
    instead of its name, on create, defer and resume alike."""
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('secret-customer-acme', p_notify => true, p_notify_payload => 'id')")
    admin.execute("SELECT lonnymq.channel_set('secret-customer-globex', p_notify => true, p_notify_payload => 'none')")
    admin.execute("SELECT lonnymq.channel_set('public-news', p_notify => true)")
    acme_id = admin.execute("SELECT id FROM lonnymq.channel WHERE name = 'secret-customer-acme'").fetchone()[0]
    listener = db.connect()
    listener.execute("LISTEN lonnymq")
    for channel in ("secret-customer-acme", "secret-customer-globex", "public-news"):
        admin.execute("SELECT lonnymq.message_create(%s, 'x')", (channel,))
    got = sorted(n.payload for n in listener.notifies(timeout=1.0, stop_after=3))
    assert got == sorted([str(acme_id), "", "public-news"])
    mid, token = admin.execute(
        "SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 1, 'secret-customer-acme')").fetchone()
    admin.execute("SELECT lonnymq.message_defer(%s, %s)", (mid, token))
    admin.execute("SELECT lonnymq.channel_pause('secret-customer-globex')")
    admin.execute("SELECT lonnymq.channel_resume('secret-customer-globex')")
    got = sorted(n.payload for n in listener.notifies(timeout=1.0, stop_after=2))
    assert got == sorted([str(acme_id), ""])
    assert not any("secret" in n.payload for n in listener.notifies(timeout=0.3))


# ------------------------------------------------------------ batches with limits

@pytest.mark.parametrize("kind", ["max_concurrency", "max_size"])
def test_batch_workers_keep_the_limit_counters_exact(db, kind):
    admin = db.connect()
    if kind == "max_concurrency":
        admin.execute("SELECT lonnymq.channel_set('lim', p_max_concurrency => 7, p_max_attempts => 3, "
                      "p_backoff_base_ms => 0)")
    else:
        admin.execute("SELECT lonnymq.channel_set('lim', p_max_size => 100000, p_max_attempts => 3, "
                      "p_backoff_base_ms => 0)")
    total = 1500
    for i in range(0, total, 500):
        admin.execute("SELECT count(*) FROM lonnymq.message_create_batch('lim', %s)", ([b"m"] * 500,))
    errors: list[BaseException] = []
    outcome = {"completed": 0, "dead": 0}
    lock = threading.Lock()

    def worker(seed: int):
        rnd = random.Random(seed)
        try:
            with psycopg.connect(db.dsn, autocommit=True) as conn:
                idle = 0
                while idle < 20:
                    rows = conn.execute(
                        "SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 5, 'lim')").fetchall()
                    if not rows:
                        idle += 1
                        time.sleep(0.01)
                        continue
                    idle = 0
                    done = []
                    for mid, token in rows:
                        if rnd.random() < 0.2:
                            verdict = _scalar(conn, "SELECT lonnymq.message_fail(%s, %s, 'flaky')", (mid, token))
                            if verdict == "dead":
                                with lock:
                                    outcome["dead"] += 1
                        else:
                            done.append((mid, token))
                    if done:
                        n = _scalar(conn, "SELECT lonnymq.message_complete_batch(%s, %s)",
                                    ([d[0] for d in done], [d[1] for d in done]))
                        assert n == len(done)
                        with lock:
                            outcome["completed"] += n
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert outcome["completed"] + outcome["dead"] == total
    assert _scalar(admin, "SELECT count(*) FROM lonnymq.message") == 0
    assert _scalar(admin, "SELECT count(*) FROM lonnymq.dead_letter WHERE channel = 'lim'") == outcome["dead"]
    num_locked, num_removed = admin.execute(
        "SELECT num_locked, num_removed FROM lonnymq.channel WHERE name = 'lim'").fetchone()
    assert num_locked == 0
    if kind == "max_size":
        created = _scalar(admin, "SELECT q.num_created FROM lonnymq.channel_quota AS q "
                                 "JOIN lonnymq.channel AS c ON c.id = q.channel_id WHERE c.name = 'lim'")
        assert created - num_removed == 0, "held = created - removed = 0"
        assert num_removed == total


# ------------------------------------------------------------ nobody waits on a duplicate

def test_a_duplicate_producer_does_not_hold_up_the_original(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('dupwait', p_dedup_window_ms => 60000)")
    first = _scalar(admin, "SELECT lonnymq.message_create('dupwait', 'a', NULL, 'k')")
    mid, token = admin.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 1, 'dupwait')").fetchone()
    dup = db.connect(autocommit=False)
    assert _scalar(dup, "SELECT lonnymq.message_create('dupwait', 'a', NULL, 'k')") == first
    # The duplicate's transaction is still open: completing the original
    # must not wait for it.
    assert db.call("SELECT lonnymq.message_complete(%s, %s)", (mid, token), lock_timeout="500ms") == [(True,)]
    dup.commit()


def test_a_due_schedule_into_a_busy_sized_channel_does_not_make_dequeue_wait(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('sizedsched', p_max_size => 10)")
    producer = db.connect(autocommit=False)
    producer.execute("SELECT lonnymq.message_create('sizedsched', 'p')")  # holds the quota row
    admin.execute("SELECT lonnymq.schedule_set('s1', 'sizedsched', 'tick', 3600000, %s)", (_now_ms(admin) - 10,))
    assert db.call("SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'other')", lock_timeout="500ms") == [(0,)]
    assert _scalar(admin, "SELECT num_runs FROM lonnymq.schedule WHERE name = 's1'") == 0, "left for later"
    producer.commit()
    assert db.call("SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'other')", lock_timeout="500ms") == [(0,)]
    assert _scalar(admin, "SELECT num_runs FROM lonnymq.schedule WHERE name = 's1'") == 1


def test_tick_advances_every_due_schedule_even_into_full_channels(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('full', p_max_size => 1)")
    admin.execute("SELECT lonnymq.message_create('full', 'x')")
    past = _now_ms(admin) - 10
    admin.execute("SELECT lonnymq.schedule_set('f' || g, 'full', 'x', 3600000, %s) FROM generate_series(1, 150) AS g",
                  (past,))
    # Due after the 150 (so in the second round of 100).
    admin.execute("SELECT lonnymq.schedule_set('zz-healthy', 'healthy', 'x', 3600000, %s)", (past + 5,))
    assert _scalar(admin, "SELECT lonnymq.tick()") == 1, "only the healthy channel had room"
    assert _scalar(admin, "SELECT count(*) FROM lonnymq.schedule WHERE next_at <= lonnymq.to_epoch(clock_timestamp())") == 0


def test_tick_skips_a_busy_channel_and_advances_every_other_schedule(db):
    admin = db.connect()
    past = _now_ms(admin) - 10
    admin.execute("SELECT lonnymq.channel_set('busy')")
    # The first schedule in due order feeds a channel that channel_set holds
    # (its guard, exclusively) in an open transaction.
    admin.execute("SELECT lonnymq.schedule_set('a-busy', 'busy', 'x', 3600000, %s)", (past - 5,))
    admin.execute("SELECT lonnymq.schedule_set('s' || g, 'free' || g, 'x', 3600000, %s) "
                  "FROM generate_series(1, 250) AS g", (past,))
    holder = db.connect(autocommit=False)
    holder.execute("SELECT lonnymq.channel_set('busy', p_max_size => 5)")
    assert db.call("SELECT lonnymq.tick()", lock_timeout="2s") == [(250,)]
    holder.commit()
    assert _scalar(admin, "SELECT lonnymq.tick()") == 1
    assert _scalar(admin, "SELECT count(*) FROM lonnymq.schedule WHERE next_at <= lonnymq.to_epoch(clock_timestamp())") == 0
