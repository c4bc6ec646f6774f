"""Ordered channels (channel_set p_ordered, 0.12.0): one message of the channel
at a time, and a message that is failed, deferred or whose lock expires keeps
its place: no later message of the channel is delivered until it is
completed, dead-lettered or cancelled.  Against 0.11 (and 0.10.1), where a
channel with max_concurrency 1 delivers B while A waits for its retry."""

from __future__ import annotations

import time

import psycopg
import pytest


def _take(db, lock_ms: int = 60000):
    return db.call("SELECT id, num_attempts, convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(%s, 1, 'o')",
                   (lock_ms,))


def _setup(db, **options):
    params = {"p_ordered": True, "p_backoff_base_ms": 300, "p_backoff_jitter": 0.0, **options}
    db.call("SELECT lonnymq.channel_set('o', " + ", ".join(f"{k} => %({k})s" for k in params) + ")", params)
    db.call("SELECT lonnymq.message_create('o', 'A')")
    db.call("SELECT lonnymq.message_create('o', 'B')")
    got = _take(db)
    assert [g[2] for g in got] == ["A"]
    assert _take(db) == [], "an ordered channel delivered a second message while the first is locked"
    return got[0][:2]


def _wait_for(db, content: str, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = _take(db)
        if got:
            assert got[0][2] == content, f"{got[0][2]} was delivered while {content} kept its place"
            return got[0][:2]
        time.sleep(0.02)
    raise AssertionError(f"{content} was not delivered again")


def test_a_failed_message_keeps_its_place(db):
    a = _setup(db)
    assert db.call("SELECT lonnymq.message_fail(%s, %s, 'boom')", a) == [("retry",)]
    assert _take(db) == [], "B was delivered while A waits for its retry"
    a = _wait_for(db, "A")
    assert a[1] == 2
    assert db.call("SELECT lonnymq.message_complete(%s, %s)", a) == [(True,)]
    assert [g[2] for g in _take(db)] == ["B"]


def test_a_deferred_message_keeps_its_place(db):
    a = _setup(db)
    assert db.call("SELECT lonnymq.message_defer(%s, %s, lonnymq.to_epoch(now()) + 300)", a) == [(True,)]
    assert _take(db) == []
    a = _wait_for(db, "A")
    assert db.call("SELECT lonnymq.message_complete(%s, %s)", a) == [(True,)]
    assert [g[2] for g in _take(db)] == ["B"]


def test_an_expired_lock_keeps_its_place(db):
    db.call("SELECT lonnymq.channel_set('o', p_ordered => true)")
    db.call("SELECT lonnymq.message_create('o', 'A')")
    db.call("SELECT lonnymq.message_create('o', 'B')")
    assert [g[2] for g in _take(db, lock_ms=50)] == ["A"]
    a = _wait_for(db, "A")
    assert a[1] == 2


@pytest.mark.parametrize("end", ["dead letter", "cancel"])
def test_the_next_message_comes_when_the_head_is_dead_or_cancelled(db, end):
    a = _setup(db, p_max_attempts=1 if end == "dead letter" else None)
    if end == "dead letter":
        assert db.call("SELECT lonnymq.message_fail(%s, %s, 'boom')", a) == [("dead",)]
    else:
        assert db.call("SELECT lonnymq.message_fail(%s, %s, 'boom')", a) == [("retry",)]
        assert db.call("SELECT lonnymq.message_cancel(%s)", (a[0],)) == [(True,)]
    assert [g[2] for g in _take(db)] == ["B"]


def test_an_unordered_channel_of_one_at_a_time_delivers_the_next_during_a_retry(db):
    """What p_ordered changes: max_concurrency 1 alone frees the place on a fail."""
    a = _setup(db, p_ordered=False, p_max_concurrency=1)
    assert db.call("SELECT lonnymq.message_fail(%s, %s, 'boom')", a) == [("retry",)]
    assert [g[2] for g in _take(db)] == ["B"]


def test_an_ordered_channel_is_one_at_a_time(db):
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        db.call("SELECT lonnymq.channel_set('o', p_ordered => true, p_max_concurrency => 2)")
    db.call("SELECT lonnymq.channel_set('o', p_ordered => true)")
    assert db.call("SELECT max_concurrency, is_ordered FROM lonnymq.channel WHERE name = 'o'") == [(1, True)]


BLOCKED = 10_000


def test_ordered_channels_blocked_behind_failed_heads_cost_other_channels_nothing(db):
    """10,000 ordered channels, each with a failed head waiting an hour for its
    retry and a message behind it: a dequeue reads a bounded number of index
    entries, none of them (held messages are outside the round order, the
    heads in message_due_ix an hour ahead), and delivers the one free
    message."""
    names = [f"o{i:05d}" for i in range(BLOCKED)]
    for i in range(0, BLOCKED, 1000):  # (each holds its channel's locks until it commits)
        db.call("SELECT count(lonnymq.channel_set(n, p_ordered => true, p_backoff_base_ms => 3600000, "
                "p_backoff_jitter => 0)) FROM unnest(%s::text[]) AS n", (names[i:i + 1000],))
    db.call("SELECT count(lonnymq.message_create(n, 'A')) FROM unnest(%s::text[]) AS n", (names,))
    db.call("SELECT count(lonnymq.message_create(n, 'B')) FROM unnest(%s::text[]) AS n", (names,))
    for i in range(0, BLOCKED, 500):
        failed = db.call(
            "SELECT count(*) FILTER (WHERE lonnymq.message_fail(d.id, d.num_attempts, 'boom') = 'retry') "
            "FROM unnest(%s::text[]) AS n CROSS JOIN LATERAL lonnymq.message_dequeue(60000, 1, n) AS d",
            (names[i:i + 500],))
        assert failed == [(500,)]
    assert db.call("SELECT count(*) FROM lonnymq.message WHERE is_held") == [(BLOCKED,)]
    db.call("SELECT lonnymq.message_create('free', 'E'), lonnymq.message_create('free', 'F')")
    with db.connect() as conn:
        conn.execute("ANALYZE lonnymq.message")
        # The first dequeue after the setup's 10,000 deliveries is the marks'
        # turn: its raise reads once what those left between the due mark and
        # the clock.  The call measured is a worker's next one.
        assert conn.execute("SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000)"
                            ).fetchall() == [("E",)]

    with db.connect(autocommit=False) as conn:
        io = ("SELECT (SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_xact_user_tables WHERE schemaname = 'lonnymq'),"
              " (SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0) FROM pg_index AS i"
              "  JOIN pg_class AS c ON c.oid = i.indrelid WHERE c.relnamespace = 'lonnymq'::regnamespace)")
        seq0, idx0 = conn.execute(io).fetchone()
        got = conn.execute("SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000)").fetchall()
        seq1, idx1 = conn.execute(io).fetchone()
        conn.rollback()
    assert got == [("F",)], "the free channel's message was not delivered"
    assert seq1 - seq0 == 0
    assert idx1 - idx0 <= 20, f"a dequeue read {idx1 - idx0} index entries beside 10,000 blocked ordered channels"
