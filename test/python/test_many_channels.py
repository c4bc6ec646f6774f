"""Many channels in one transaction (issue 38, item 3).

Every call that decides a message's state from its channel's configuration
holds that channel's guard, an advisory lock, until it commits
(sql/src/channels/_channel_guard.sql).  Each advisory lock takes
an entry of the server's shared lock table, sized for
max_locks_per_transaction (64 by default) per connection: 0.13.0's producer
of 40,000 new channels in one transaction failed with 53200.  Now a
transaction holds at most 32 channel guards, then bucket guards (1/32 of
all channels each), which configuration changes also take.
"""

from __future__ import annotations

import pytest
from psycopg import errors

from lonnymq_dev.invariants import assert_nothing_below_the_marks

CHANNELS = 100_000
# 32 channel guards, 32 bucket guards, and the epoch's parity (or both).
MAX_ADVISORY_LOCKS = 32 + 32 + 2


def _advisory_locks(conn) -> int:
    return conn.execute("SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'"
                        ).fetchone()[0]


def _bucket(conn, channel: str) -> int:
    return conn.execute("SELECT hashtext(%s) & 31", (channel,)).fetchone()[0]


def test_a_producer_creates_messages_in_100000_new_channels_in_one_transaction(db):
    with db.connect() as conn:
        assert conn.execute("SHOW max_locks_per_transaction").fetchone() == ("64",), "not the default setting"
        conn.execute("BEGIN")
        conn.execute("DO $$ BEGIN PERFORM lonnymq.message_create('order-' || g, 'x') "
                     f"FROM generate_series(1, {CHANNELS}) AS g; END $$")
        conn.execute("SELECT lonnymq.message_create_batch('order-batch-' || g, ARRAY['y'::bytea]) "
                     "FROM generate_series(1, 1000) AS g")
        held = _advisory_locks(conn)
        conn.execute("COMMIT")
        assert held <= MAX_ADVISORY_LOCKS, f"the transaction held {held} advisory locks"
        assert conn.execute("SELECT count(DISTINCT channel) FROM lonnymq.message").fetchone() == (CHANNELS + 1000,)
        assert conn.execute("SELECT count(*) FROM lonnymq.message_dequeue(60000, 1000)").fetchone()[0] == 1000
        assert_nothing_below_the_marks(conn)


def test_a_configuration_change_waits_for_a_producer_past_its_32nd_channel_in_its_bucket(db):
    """A producer past its 32nd channel holds bucket guards: a channel_set
    of a channel in a bucket it reached waits for it, whether or not the
    producer wrote to that very channel; one of a bucket it did not reach
    does not wait.  Once it commits, the new limit counts its messages."""
    producer, admin = db.connect(), db.connect()
    first = [f"bulk-{g}" for g in range(1, 33)]  # its own channel guards
    # More channels, all in the buckets of 'bulk-100' and 'bulk-101' only.
    target = {_bucket(admin, "bulk-100"), _bucket(admin, "bulk-101")}
    later = [f"bulk-{g}" for g in range(100, 3000) if _bucket(admin, f"bulk-{g}") in target][:40]
    free = next(f"free-{g}" for g in range(1000) if _bucket(admin, f"free-{g}") not in target
                and f"free-{g}" not in first)
    same_bucket_unused = next(f"other-{g}" for g in range(1000) if _bucket(admin, f"other-{g}") in target)
    producer.execute("BEGIN")
    for channel in first + later:
        producer.execute("SELECT lonnymq.message_create(%s, 'x')", (channel,))
    assert _advisory_locks(producer) <= 32 + len(target) + 2
    admin.execute("SET lock_timeout = '300ms'")
    for channel in (later[-1], same_bucket_unused, first[0]):
        with pytest.raises(errors.LockNotAvailable):
            admin.execute("SELECT lonnymq.channel_set(%s, p_max_concurrency => 1)", (channel,))
    admin.execute("SELECT lonnymq.channel_set(%s, p_max_concurrency => 1)", (free,))  # waits for nothing
    producer.execute("COMMIT")
    admin.execute("SELECT lonnymq.channel_set(%s, p_max_concurrency => 1)", (later[-1],))
    admin.execute("SELECT lonnymq.message_create(%s, 'second')", (later[-1],))
    # The limit counts the producer's message: one delivery at a time.
    assert len(admin.execute("SELECT * FROM lonnymq.message_dequeue(60000, 10, %s)", (later[-1],)).fetchall()) == 1
    assert admin.execute("SELECT * FROM lonnymq.message_dequeue(60000, 10, %s)", (later[-1],)).fetchall() == []


def test_a_transaction_under_32_channels_keeps_its_own_guards(db):
    """Below 32 channels a configuration change waits only for the
    producers of its own channel, whatever its bucket."""
    producer, admin = db.connect(), db.connect()
    producer.execute("BEGIN")
    producer.execute("SELECT lonnymq.message_create('few-' || g, 'x') FROM generate_series(1, 10) AS g")
    admin.execute("SET lock_timeout = '300ms'")
    same_bucket = next(f"other-{g}" for g in range(1000) if _bucket(admin, f"other-{g}") == _bucket(admin, "few-3"))
    admin.execute("SELECT lonnymq.channel_set(%s, p_max_concurrency => 1)", (same_bucket,))
    with pytest.raises(errors.LockNotAvailable):
        admin.execute("SELECT lonnymq.channel_set('few-3', p_max_concurrency => 1)")
    producer.execute("COMMIT")
