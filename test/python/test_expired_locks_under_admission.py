"""Expired locks in channels that admit their messages (a release interval,
max_concurrency, a pause): the cases a review of 0.11.0's admission found
by reading the code, each a state a lock passes through between its expiry
and its new delivery (doc/dequeue-design.md, "Limits as admission"):

* made ready again in a channel with a release interval, it is the
  channel's one pending delivery; its holder's heartbeat takes it back,
  and must count it out, or the channel never admits another message;
* held by a paused channel, its holder's heartbeat renews it: the resume
  must not deliver it again while the renewed lock lasts;
* held by a paused channel with max_concurrency, it must be delivered again
  after the resume, and count towards the limit once.
"""

from __future__ import annotations

import time

from lonnymq_dev.calls import complete, dequeue, scalar


def _heartbeat(conn, mid: int, token: int, lock_ms: int) -> bool:
    return scalar(conn, "SELECT lonnymq.message_heartbeat(%s, %s, %s)", (mid, token, lock_ms))


def _first_delivery(conn, channel: str, columns: str) -> list[tuple]:
    """The first non-empty dequeue of the channel within a second (its
    messages wait for a promotion, or for their release): its rows."""
    for _ in range(20):
        rows = dequeue(conn, channel=channel, columns=columns)
        if rows:
            return rows
        time.sleep(0.05)
    return []


def _promote(conn) -> None:
    """A dequeue of another channel: it promotes what is due, takes nothing here."""
    assert dequeue(conn, channel="elsewhere") == []


def test_a_heartbeat_of_a_lock_made_ready_again_frees_the_release_intervals_pending_place(db):
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.channel_set('r', p_release_interval_ms => 20)")
        conn.execute("SELECT lonnymq.message_create('r', 'm1')")
        (mid, token), = [r[:2] for r in dequeue(conn, lock_ms=1, channel="r", columns="id, num_attempts")]
        time.sleep(0.1)
        _promote(conn)  # the expired lock is ready again: the channel's pending delivery
        assert scalar(conn, "SELECT position IS NOT NULL FROM lonnymq.message WHERE id = %s", (mid,))
        assert _heartbeat(conn, mid, token, 60_000) is True
        assert complete(conn, mid, token) is True
        conn.execute("SELECT lonnymq.message_create('r', 'm2')")
        got = [r[0] for r in _first_delivery(conn, "r", "convert_from(content, 'UTF8')")]
        assert got == ["m2"], "the channel admitted nothing after the heartbeat: its pending place stayed taken"


def test_a_heartbeat_of_a_lock_held_by_a_paused_channel_survives_the_resume(db):
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.message_create('p', 'm')")
        (mid, token), = [r[:2] for r in dequeue(conn, lock_ms=1, channel="p", columns="id, num_attempts")]
        conn.execute("SELECT lonnymq.channel_pause('p')")
        time.sleep(0.05)
        _promote(conn)  # the expired lock is held by the pause
        assert _heartbeat(conn, mid, token, 60_000) is True
        conn.execute("SELECT lonnymq.channel_resume('p')")
        for _ in range(3):
            assert dequeue(conn, channel="p") == [], "delivered again while its renewed lock lasts"
        assert complete(conn, mid, token) is True


def test_an_expired_lock_held_by_a_pause_is_delivered_again_after_the_resume(db):
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.channel_set('q', p_max_concurrency => 1)")
        conn.execute("SELECT lonnymq.message_create('q', 'm'), lonnymq.message_create('q', 'n')")
        (mid, token), = [r[:2] for r in dequeue(conn, lock_ms=1, channel="q", columns="id, num_attempts")]
        conn.execute("SELECT lonnymq.channel_pause('q')")
        time.sleep(0.05)
        _promote(conn)  # the expired lock is held by the pause
        conn.execute("SELECT lonnymq.channel_resume('q')")
        got = _first_delivery(conn, "q", "id, num_attempts, is_recovered")
        assert got == [(mid, token + 1, True)], "the expired lock was not delivered again after the resume"
        assert dequeue(conn, channel="q") == [], "max_concurrency 1: the recovered lock holds the one place"
        assert scalar(conn, "SELECT num_admitted FROM lonnymq.channel WHERE name = 'q'") == 1
        assert complete(conn, mid, token + 1) is True
        assert [r[0] for r in dequeue(conn, channel="q", columns="convert_from(content, 'UTF8')")] == ["n"]
