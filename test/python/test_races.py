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
    # 'x' has delivered its message and is empty.
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
    """Two consumers have each taken a message of the channel, uncommitted,
    when max_concurrency is set: both locks are admitted (counted), so the
    channel delivers nothing more."""
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
    assert _one(db, "SELECT num_admitted FROM lonnymq.channel WHERE name = 'x'") == [(2,)]
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
    # claimed (its takes claim, 0.15.0: max_concurrency counts locks): the
    # lock in flight only; in the one free slot, one placed message, unclaimed
    assert _one(db, "SELECT c.num_admitted, count(*) FILTER (WHERE m.is_admitted AND m.is_locked),"
                    " count(*) FILTER (WHERE m.is_admitted),"
                    " count(*) FILTER (WHERE m.position IS NOT NULL AND NOT m.is_admitted) FROM lonnymq.channel AS c"
                    " JOIN lonnymq.message AS m ON m.channel_id = c.id"
                    " WHERE c.name = 'x' GROUP BY c.num_admitted") == [(1, 1, 1, 1)]
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
    # idle: nothing of x left, and nothing behind for a channel without configuration
    assert _one(db, "SELECT count(*) FROM lonnymq.message WHERE channel = 'x'") == [(0,)]
    assert _one(db, "SELECT count(*) FROM lonnymq.channel WHERE name = 'x'") == [(0,)]
    try:
        producer.execute("SELECT lonnymq.message_create('x', 'late')")
        producer.commit()
    except psycopg.errors.SerializationFailure:
        producer.rollback()
        _one(db, "SELECT lonnymq.message_create('x', 'late')")  # the retry
    producer.close()
    got = _one(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 1, NULL)")
    assert got == [("late",)]


def _mark(db) -> int:
    return _one(db, "SELECT last_value FROM lonnymq.position_mark_seq")[0][0]


def test_a_repeatable_read_producer_whose_snapshot_predates_a_raise_of_the_marks_is_not_passed_over(db):
    """Takes start at the position mark, which dequeues raise past what was
    consumed (0.8.0 to 0.10.1: the channel's floor).  A REPEATABLE READ
    producer reads the front and its channel's places from its snapshot,
    which may predate a raise: what it sees ready there lies below the mark.
    Its message is placed at or above the mark whatever it read, and is
    delivered in its channel's (dequeue_at, id) order: dated at its
    transaction's start, before the messages created since."""
    _one(db, "SELECT count(*) FROM lonnymq.message_create_batch('r', ARRAY['a', 'b']::bytea[])")
    seen_ready, = _one(db, "SELECT max(position) FROM lonnymq.message WHERE channel = 'r'")[0]

    producer = db.connect(autocommit=False)
    producer.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    producer.execute("SELECT count(*) FROM lonnymq.message")  # the snapshot (a, b ready); now() is its start
    time.sleep(1.2)
    assert len(_one(db, "SELECT id FROM lonnymq.message_dequeue(60000, 2)")) == 2
    _one(db, "SELECT count(*) FROM lonnymq.message_create_batch('r', ARRAY['c', 'd', 'e']::bytea[])")
    got = _one(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 2)")
    assert [g[0] for g in got] == ["c", "d"]
    # Other work goes on until the dequeues have raised the mark past all
    # that the producer's snapshot sees ready.
    _one(db, "SELECT count(*) FROM lonnymq.message_create_batch('f', array_fill('f'::bytea, ARRAY[64]))")
    for _ in range(64):
        if _mark(db) > seen_ready:
            break
        _one(db, "SELECT lonnymq.message_complete(id, num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'f')")
    assert _mark(db) > seen_ready, "the dequeues never raised the mark past the producer's snapshot"
    _one(db, "SELECT lonnymq.message_complete(id, num_attempts) FROM lonnymq.message_dequeue(60000, 64, 'f')")

    producer.execute("SELECT lonnymq.message_create('r', 'late')")
    producer.commit()
    producer.close()
    mark = _mark(db)
    assert _one(db, "SELECT count(*) FROM lonnymq.message WHERE position < %s", (mark,)) == [(0,)], \
        "a message was placed below the mark, where no take looks"
    got = _one(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 5)")
    assert [g[0] for g in got] == ["late", "e"]


# A dequeue and the holder of an expired lock completing it, beside a worker
# holding the other channel's row: test/isolation/specs/lock_expiry.spec.


def test_a_message_dated_before_its_channels_last_is_delivered_first(db):
    """Within a channel, (dequeue_at, id) order (doc/dequeue-design.md, the
    contract and "Turns, and priority"): a message created in a transaction
    that began more than a second before another producer's (dated at its
    start, now()), or given a past dequeue_at, is delivered before the
    channel's messages dated after it, by a single-message dequeue as by a
    batch.  Less than a second apart, new messages keep the order they were
    created in (concurrent producers' transaction starts differ by
    milliseconds; the design's table of differences says so): checked last."""
    for channel, limit in (("one", 1), ("any", 1), ("batch", 5)):
        early = db.connect(autocommit=False)
        early.execute("SELECT 1")  # its transaction, and now(), begin here
        time.sleep(1.3)
        _one(db, "SELECT lonnymq.message_create(%s, 'b')", (channel,))
        early.execute("SELECT lonnymq.message_create(%s, 'a: older transaction')", (channel,))
        early.commit()
        early.close()
        _one(db, "SELECT lonnymq.message_create(%s, 'c')", (channel,))
        _one(db, "SELECT lonnymq.message_create(%s, 'a: past', lonnymq.to_epoch(clock_timestamp()) - 5000)",
             (channel,))
        got = []
        for _ in range(4):
            got += _one(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, %s, %s)",
                        (limit, None if channel == "any" else channel))
        assert [g[0] for g in got] == ["a: past", "a: older transaction", "b", "c"], channel
    early = db.connect(autocommit=False)
    early.execute("SELECT 1")
    time.sleep(0.3)
    _one(db, "SELECT lonnymq.message_create('near', 'first created')")
    early.execute("SELECT lonnymq.message_create('near', 'older by 300 ms, created second')")
    early.commit()
    early.close()
    got = _one(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 5, 'near')")
    assert [g[0] for g in got] == ["first created", "older by 300 ms, created second"]
