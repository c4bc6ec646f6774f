"""The channel row lock (doc/README.md, "The channel row lock"): every call
that writes a configured channel's row waits for that channel's row lock,
and a dequeue never does.

The property behind it: nothing locks a channel row without holding the
channel's row lock, so a dequeue that holds the lock (tried, never waited
for) finds the row free.  In 0.11.0 a dequeue tried channel rows with `FOR
NO KEY UPDATE SKIP LOCKED`, which PostgreSQL can still wait for (a row
version updated by a transaction that just ended: the newer version's
holder is waited for), and two dequeues deadlocked (the soak test, one run
in about ten).  That race cannot be replayed from SQL; what is replayed
here is the rule that makes it impossible: a writer of a channel row that
skipped the lock would not wait below, and a dequeue that waited for it
would time out.
"""

from __future__ import annotations

import psycopg
import pytest


def _hold_row_lock(db, channel: str) -> psycopg.Connection:
    """A transaction holding the channel's row lock, as a completion or a
    fail of one of its messages in flight would."""
    holder = db.connect(autocommit=False)
    holder.execute("SELECT lonnymq._channel_row_lock(lonnymq._channel_id(%s))", (channel,))
    return holder


def _take(db, channel: str, lock_ms: int = 60000):
    return db.call("SELECT id, num_attempts FROM lonnymq.message_dequeue(%s, 1, %s)", (lock_ms, channel))[0]


def _setup(db):
    db.call("SELECT lonnymq.channel_set('lim', p_max_concurrency => 2, p_max_size => 100)")
    db.call("SELECT lonnymq.message_create('lim', 'x') FROM generate_series(1, 4)")


# Each is given a delivery of 'lim', taken before the lock is held.
WRITERS = {
    "message_complete": "SELECT lonnymq.message_complete(%(id)s, %(n)s)",
    "message_complete_batch": "SELECT * FROM lonnymq.message_complete_batch(ARRAY[%(id)s], ARRAY[%(n)s])",
    "message_complete_dequeue":
        "SELECT * FROM lonnymq.message_complete_dequeue(ARRAY[%(id)s], ARRAY[%(n)s], 60000)",
    "message_fail": "SELECT lonnymq.message_fail(%(id)s, %(n)s, 'no')",
    "message_defer": "SELECT lonnymq.message_defer(%(id)s, %(n)s, 1000)",
    "message_cancel": "SELECT lonnymq.message_cancel(%(id)s + 1)",
    "channel_set": "SELECT lonnymq.channel_set('lim', p_max_concurrency => 3)",
    "channel_pause": "SELECT lonnymq.channel_pause('lim')",
    "channel_drop": "SELECT lonnymq.channel_drop('lim', true)",
}


def _fingerprint(db):
    return db.call("SELECT count(*), sum(num_attempts), sum(dequeue_at), bool_or(is_held) FROM lonnymq.message")


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_writer_of_a_channel_row_waits_for_its_row_lock(db, writer):
    _setup(db)
    got = _take(db, "lim")
    params = {"id": got[0], "n": got[1]}
    before = _fingerprint(db)
    holder = _hold_row_lock(db, "lim")
    with pytest.raises(psycopg.errors.LockNotAvailable):
        db.call(WRITERS[writer], params, lock_timeout="200ms")
    holder.rollback()
    holder.close()
    assert _fingerprint(db) == before, "the refused call changed something"
    db.call(WRITERS[writer], params)  # and goes through once the lock is free


def test_channel_resume_waits_for_the_row_lock(db):
    _setup(db)
    db.call("SELECT lonnymq.channel_pause('lim')")
    holder = _hold_row_lock(db, "lim")
    with pytest.raises(psycopg.errors.LockNotAvailable):
        db.call("SELECT lonnymq.channel_resume('lim')", lock_timeout="200ms")
    holder.rollback()
    holder.close()
    assert db.call("SELECT lonnymq.channel_resume('lim')") == [(True,)]


def test_a_heartbeat_that_takes_back_a_pending_delivery_waits_for_the_row_lock(db):
    """An expired lock made ready again is its limited channel's pending
    delivery; a heartbeat of it takes it back and frees the place (an
    admission), so it writes the channel's row."""
    db.call("SELECT lonnymq.channel_set('lim', p_max_concurrency => 1)")
    db.call("SELECT lonnymq.message_create('lim', 'x')")
    got = _take(db, "lim", lock_ms=1)
    db.call("SELECT pg_sleep(0.05)")
    # A dequeue elsewhere promotes the expired lock: ready again, still locked.
    assert db.call("SELECT * FROM lonnymq.message_dequeue(60000, 1, 'elsewhere')") == []
    assert db.call("SELECT position IS NOT NULL AND is_locked FROM lonnymq.message WHERE id = %s", (got[0],)) == [
        (True,)]
    holder = _hold_row_lock(db, "lim")
    with pytest.raises(psycopg.errors.LockNotAvailable):
        db.call("SELECT lonnymq.message_heartbeat(%s, %s, 60000)", got, lock_timeout="200ms")
    holder.rollback()
    holder.close()
    assert db.call("SELECT lonnymq.message_heartbeat(%s, %s, 60000)", got) == [(True,)]


def test_a_dequeue_never_waits_for_a_channel_row_lock(db):
    """While another transaction holds the row lock of a channel with a
    release interval (whose delivery writes the row), a dequeue does not
    wait: it delivers the other channels' messages and leaves that channel's
    for a later call, which delivers it once the lock is free."""
    db.call("SELECT lonnymq.channel_set('rate', p_release_interval_ms => 1)")
    db.call("SELECT lonnymq.message_create('rate', 'r')")
    db.call("SELECT lonnymq.message_create('free', 'f')")
    holder = _hold_row_lock(db, "rate")
    got = db.call("SELECT channel FROM lonnymq.message_dequeue(60000, 10)", lock_timeout="200ms")
    assert got == [("free",)]
    holder.rollback()
    holder.close()
    got = db.call("SELECT id, num_attempts, channel FROM lonnymq.message_dequeue(60000, 10)", lock_timeout="200ms")
    assert [g[2] for g in got] == ["rate"]
    assert db.call("SELECT lonnymq.message_complete(%s, %s)", got[0][:2]) == [(True,)]
