"""Interleavings that once lost a message or broke a limit, replayed with real
connections held open at the dangerous instant."""

from __future__ import annotations

import threading
import time

import psycopg

from lonnymq_dev.calls import complete


def _one(db, sql, params=()):
    return db.call(sql, params, lock_timeout="10s")


def _in_thread(fn):
    result: dict = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001
            result["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    return t, result


def _is_waiting(db, marker: str) -> bool:
    rows = _one(db, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (f"%{marker}%",))
    return rows[0][0] > 0


def _wait_until_blocked(db, marker: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _is_waiting(db, marker):
            return
        time.sleep(0.02)
    raise AssertionError(f"{marker!r} never waited for a lock")


def test_a_repeatable_read_consumer_never_loses_a_message_committed_after_its_snapshot(db):
    # 'x' is in the rotation but empty.
    _one(db, "SELECT lonnymq.message_create('x', 'first')")
    got = _one(db, "SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 1, 'x')")
    _one(db, "SELECT lonnymq.message_complete(%s, %s)", got[0])

    consumer = db.connect(autocommit=False)
    consumer.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    consumer.execute("SELECT 1")  # the snapshot is taken here
    _one(db, "SELECT lonnymq.message_create('x', 'late')")  # committed after it
    assert consumer.execute("SELECT * FROM lonnymq.message_dequeue(60000, 1, 'x')").fetchall() == []
    consumer.commit()
    consumer.close()

    got = _one(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 1, NULL)")
    assert got == [("late",)], "the message committed after the consumer's snapshot was lost"


def test_channel_set_counts_locks_taken_by_consumers_in_flight(db):
    """A consumer serving the channel (row lock) and one taking from it as a
    busy channel (no turn) are both in flight when max_concurrency is set."""
    _one(db, "SELECT lonnymq.message_create('x', convert_to(g::text, 'UTF8')) FROM generate_series(1, 6) AS g")
    _one(db, "SELECT * FROM lonnymq.message_dequeue(1, 1, 'nothing')")

    serving = db.connect(autocommit=False)
    assert len(serving.execute("SELECT * FROM lonnymq.message_dequeue(60000, 1, 'x')").fetchall()) == 1
    busy = db.connect(autocommit=False)
    assert len(busy.execute("SELECT * FROM lonnymq.message_dequeue(60000, 1, 'x')").fetchall()) == 1

    t, result = _in_thread(lambda: _one(db, "SELECT lonnymq.channel_set('x', 2) /* set-limit */"))
    _wait_until_blocked(db, "set-limit")
    serving.commit()
    busy.commit()
    t.join(20)
    assert "error" not in result, result
    assert _one(db, "SELECT num_locked FROM lonnymq.channel WHERE name = 'x'") == [(2,)]
    assert _one(db, "SELECT * FROM lonnymq.message_dequeue(60000, 5, 'x')") == [], \
        "max_concurrency 2 with 2 locks in flight must deliver nothing more"
    serving.close()
    busy.close()


def test_channel_set_does_not_count_a_lock_completed_in_flight(db):
    _one(db, "SELECT lonnymq.message_create('x', convert_to(g::text, 'UTF8')) FROM generate_series(1, 4) AS g")
    held = _one(db, "SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 2, 'x')")

    completer = db.connect(autocommit=False)
    assert complete(completer, *held[0]) is True
    t, result = _in_thread(lambda: _one(db, "SELECT lonnymq.channel_set('x', 2, 10) /* set-limit */"))
    _wait_until_blocked(db, "set-limit")
    completer.commit()
    completer.close()
    t.join(20)
    assert "error" not in result, result

    locked = _one(db, "SELECT count(*) FROM lonnymq.message AS m JOIN lonnymq.channel AS c "
                      "ON c.id = m.channel_id WHERE c.name = 'x' AND m.is_locked")[0][0]
    assert locked == 1
    assert _one(db, "SELECT num_locked FROM lonnymq.channel WHERE name = 'x'") == [(1,)]
    # one slot is free: exactly one more message is delivered
    assert len(_one(db, "SELECT * FROM lonnymq.message_dequeue(60000, 5, 'x')")) == 1
    # max_size 10 with 3 held: 7 more fit, the 8th is dropped
    ids = [_one(db, "SELECT lonnymq.message_create('x', 'more')")[0][0] for _ in range(8)]
    assert sum(i is not None for i in ids) == 7 and ids[-1] is None


def test_channel_drop_and_complete_do_not_deadlock(db):
    for order in ("complete-first", "drop-first"):
        _one(db, "SELECT lonnymq.channel_set('x', 5)")
        _one(db, "SELECT lonnymq.message_create('x', 'a'), lonnymq.message_create('x', 'b')")
        held = _one(db, "SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 2, 'x')")
        first = db.connect(autocommit=False)
        if order == "complete-first":
            complete(first, *held[0])
            t, result = _in_thread(lambda: _one(db, "SELECT lonnymq.channel_drop('x', true) /* drop-it */"))
            _wait_until_blocked(db, "drop-it")
        else:
            first.execute("SELECT lonnymq.channel_drop('x', true)")
            t, result = _in_thread(
                lambda: _one(db, "SELECT lonnymq.message_defer(%s, %s) /* defer-it */", held[1]))
            _wait_until_blocked(db, "defer-it")
        first.commit()
        first.close()
        t.join(20)
        assert "error" not in result, f"{order}: {result.get('error')!r}"
        assert _one(db, "SELECT count(*) FROM lonnymq.channel WHERE name = 'x'") == [(0,)]


def test_a_repeatable_read_producer_fails_rather_than_miss_a_channel_going_idle(db):
    """A producer whose snapshot predates the consumer's 'empty' decision must
    not trust it: it gets a serialization failure (40001) and retries."""
    _one(db, "SELECT lonnymq.message_create('x', 'first')")
    # (a 1 ms lock: the channel waits for its expiry, then is found empty)
    got = _one(db, "SELECT id, num_attempts FROM lonnymq.message_dequeue(1, 1, 'x')")
    _one(db, "SELECT lonnymq.message_complete(%s, %s)", got[0])
    time.sleep(0.01)

    producer = db.connect(autocommit=False)
    producer.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    producer.execute("SELECT 1")
    _one(db, "SELECT * FROM lonnymq.message_dequeue(60000, 1, 'x')")  # x goes idle
    assert _one(db, "SELECT next_at FROM lonnymq.channel WHERE name = 'x'") == [(None,)]
    try:
        producer.execute("SELECT lonnymq.message_create('x', 'late')")
        producer.commit()
    except psycopg.errors.SerializationFailure:
        producer.rollback()
        _one(db, "SELECT lonnymq.message_create('x', 'late')")  # the retry
    producer.close()
    got = _one(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 1, NULL)")
    assert got == [("late",)]


def test_a_repeatable_read_producer_below_a_floor_raised_after_its_snapshot_is_not_passed_over(db):
    """0.7.0: batch dequeues start their walk at the channel's floor.  A
    REPEATABLE READ producer reads the channel row from its snapshot, which
    may predate a raise: its message, dated at its transaction's start, can
    fall below the raised floor while the floor it read was lower.  It lowers
    the floor whatever it read (0.8.0: a lowering row of channel_floor)."""
    _one(db, "SELECT count(*) FROM lonnymq.message_create_batch('r', ARRAY['a', 'b']::bytea[])")
    # The first batch finds the new channel through its wake-up (the general
    # way); the channel is then alone in the rotation.
    assert len(_one(db, "SELECT id FROM lonnymq.message_dequeue(60000, 2)")) == 2

    producer = db.connect(autocommit=False)
    producer.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    producer.execute("SELECT 1")  # the snapshot; now() is its start
    time.sleep(1.2)
    _one(db, "SELECT count(*) FROM lonnymq.message_create_batch('r', ARRAY['c', 'd', 'e']::bytea[])")
    got = _one(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 2)")
    assert [g[0] for g in got] == ["c", "d"]
    floor_at, started = _one(
        db,
        "SELECT lonnymq._channel_scan_from(c.id), "
        "(SELECT lonnymq.to_epoch(xact_start) FROM pg_stat_activity WHERE pid = %s) "
        "FROM lonnymq.channel AS c WHERE c.name = 'r'",
        (producer.info.backend_pid,),
    )[0]
    assert floor_at is not None and floor_at > started, "the raise did not put the floor above the producer's start"

    producer.execute("SELECT lonnymq.message_create('r', 'late')")
    producer.commit()
    producer.close()
    assert _one(db, "SELECT count(*) FROM lonnymq.channel_floor WHERE NOT is_raise") == [(1,)], "no lowering"
    got = _one(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 5)")
    assert [g[0] for g in got] == ["late", "e"]
