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
