"""Periodic messages (schedule_set, tick) with real connections: many workers
dequeuing at once and no background process, each period yields exactly one
message; missed periods coalesce; a due schedule never makes a dequeue or
tick() wait for a busy channel.  (The calls' contract: test/pgtap/140_schedules.sql.)
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from lonnymq_dev.calls import scalar, now_ms, dequeue, complete


def test_each_period_yields_exactly_one_message_with_many_workers(db):
    admin = db.connect()
    every = 200
    start = now_ms(admin) + 100
    admin.execute("SELECT lonnymq.schedule_set('beat', 'beats', 'tick', %s, %s)", (every, start))
    stop = threading.Event()
    errors: list[BaseException] = []
    delivered: list[int] = []
    lock = threading.Lock()

    def worker():
        try:
            with psycopg.connect(db.dsn, autocommit=True) as conn:
                while not stop.is_set():
                    rows = dequeue(conn, channel="beats", columns="id, num_attempts, dequeue_at")
                    for mid, token, _ in rows:
                        assert complete(conn, mid, token) is True
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
    end = now_ms(admin)
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
    now = now_ms(admin)
    start = now - 10_500  # 10 full periods of 1 s missed, the 11th boundary is now-500
    admin.execute("SELECT lonnymq.schedule_set('late', 'late', 'x', 1000, %s)", (start,))
    assert scalar(admin, "SELECT lonnymq.tick()") == 1
    rows = admin.execute(
        "SELECT dequeue_at FROM lonnymq.message WHERE channel = 'late' AND schedule IS NULL").fetchall()
    assert len(rows) == 1
    assert rows[0][0] == start + 10 * 1000, "the message is for the latest missed boundary"
    runs, missed, next_at = admin.execute(
        "SELECT num_runs, num_missed, next_at FROM lonnymq.schedule WHERE name = 'late'").fetchone()
    assert (runs, missed, next_at) == (1, 10, start + 11 * 1000)
    assert scalar(admin, "SELECT lonnymq.tick()") == 0, "nothing more until the next boundary"



def test_a_due_schedule_into_a_busy_sized_channel_does_not_make_dequeue_wait(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('sizedsched', p_max_size => 10)")
    producer = db.connect(autocommit=False)
    producer.execute("SELECT lonnymq.message_create('sizedsched', 'p')")  # holds the quota row
    admin.execute("SELECT lonnymq.schedule_set('s1', 'sizedsched', 'tick', 3600000, %s)", (now_ms(admin) - 10,))
    assert db.call("SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'other')", lock_timeout="500ms") == [(0,)]
    assert scalar(admin, "SELECT num_runs FROM lonnymq.schedule WHERE name = 's1'") == 0, "left for later"
    producer.commit()
    assert db.call("SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'other')", lock_timeout="500ms") == [(0,)]
    assert scalar(admin, "SELECT num_runs FROM lonnymq.schedule WHERE name = 's1'") == 1


def test_tick_advances_every_due_schedule_even_into_full_channels(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('full', p_max_size => 1)")
    admin.execute("SELECT lonnymq.message_create('full', 'x')")
    past = now_ms(admin) - 10
    admin.execute("SELECT lonnymq.schedule_set('f' || g, 'full', 'x', 3600000, %s) FROM generate_series(1, 150) AS g",
                  (past,))
    # Due after the 150 (so in the second round of 100).
    admin.execute("SELECT lonnymq.schedule_set('zz-healthy', 'healthy', 'x', 3600000, %s)", (past + 5,))
    assert scalar(admin, "SELECT lonnymq.tick()") == 1, "only the healthy channel had room"
    assert scalar(admin, "SELECT count(*) FROM lonnymq.schedule WHERE next_at <= lonnymq.to_epoch(clock_timestamp())") == 0


def test_tick_skips_a_busy_channel_and_advances_every_other_schedule(db):
    admin = db.connect()
    past = now_ms(admin) - 10
    admin.execute("SELECT lonnymq.channel_set('busy')")
    # The first schedule in due order feeds a channel that channel_set holds
    # (its guard, exclusively) in an open transaction.
    admin.execute("SELECT lonnymq.schedule_set('a-busy', 'busy', 'x', 3600000, %s)", (past - 5,))
    admin.execute("SELECT lonnymq.schedule_set('s' || g, 'free' || g, 'x', 3600000, %s) "
                  "FROM generate_series(1, 250) AS g", (past,))
    holder = db.connect(autocommit=False)
    holder.execute("SELECT lonnymq.channel_set('busy', p_max_size => 5)")
    # Past its 32nd channel guard, tick() holds bucket guards (1/32 of the
    # channels each: sql/src/channels/_channel_guard.sql), and
    # the configuration change in flight holds the busy channel's bucket:
    # the free channels of that bucket are left for the next call too, and
    # only they.
    in_busy_bucket = scalar(admin, "SELECT count(*) FROM generate_series(1, 250) AS g "
                                   "WHERE hashtext('free' || g) & 31 = hashtext('busy') & 31")
    created = db.call("SELECT lonnymq.tick()", lock_timeout="2s")[0][0]
    assert 250 - in_busy_bucket <= created <= 250
    holder.commit()
    assert scalar(admin, "SELECT lonnymq.tick()") == 1 + 250 - created
    assert scalar(admin, "SELECT count(*) FROM lonnymq.schedule WHERE next_at <= lonnymq.to_epoch(clock_timestamp())") == 0


def test_a_start_below_the_due_mark_is_promoted_by_the_next_dequeue(db):
    """A schedule set with a start in the past is due at once, whatever the
    marks: the promotion's probe of message_due_ix starts at the due mark,
    and its occurrence's key there is greatest(dequeue_at, created_at),
    created_at being schedule_set's clock (sql/src/schedules/schedule_set.sql)."""
    conn = db.connect()
    conn.execute("SELECT count(*) FROM lonnymq.message_create_batch('filler', array_fill('m'::bytea, ARRAY[200]))")
    start = now_ms(conn) - 3_600_000
    # Raises (a take of 16 tries one) spaced past the 100 ms margin: the
    # due mark passes the start.
    for _ in range(4):
        assert len(dequeue(conn, limit=16, channel="filler")) == 16
        time.sleep(0.15)
    due_mark = scalar(conn, "SELECT pg_sequence_last_value('lonnymq.due_mark_seq')")
    assert due_mark > start, "the due mark was not raised past the start: the test proves nothing"
    conn.execute("SELECT lonnymq.schedule_set('hourly', 'reports', 'r', 3600000, %s)", (start,))
    rows = dequeue(conn, channel="reports", columns="dequeue_at")
    assert rows == [(start + 3_600_000,)], "one message, for the latest boundary that has passed"
    assert scalar(conn, "SELECT num_runs FROM lonnymq.schedule WHERE name = 'hourly'") == 1


def test_schedule_set_keeps_one_row_per_name_at_every_isolation_level(db):
    """No unique index on the name (0.13.1, the schedule table): schedule_set
    serialises on an advisory lock, and one whose transaction snapshot may
    miss a row inserted since refuses with 40001 instead of adding a second."""
    older = db.connect()
    older.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    older.execute("SELECT 1")  # its snapshot
    other = db.connect()
    other.execute("SELECT lonnymq.schedule_set('nightly', 'jobs', 'a', 86400000)")
    with pytest.raises(psycopg.errors.SerializationFailure):
        older.execute("SELECT lonnymq.schedule_set('nightly', 'jobs', 'b', 86400000)")
    older.execute("ROLLBACK")
    # A snapshot taken after it: the row is seen and replaced.
    older.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    older.execute("SELECT lonnymq.schedule_set('nightly', 'jobs', 'c', 86400000)")
    older.execute("COMMIT")
    # READ COMMITTED, two at once: the second waits for the first, then
    # replaces its row.
    first = db.connect(autocommit=False)
    first.execute("SELECT lonnymq.schedule_set('hourly', 'jobs', 'd', 3600000)")
    done = threading.Event()

    def second():
        with psycopg.connect(db.dsn, autocommit=True) as conn:
            conn.execute("SELECT lonnymq.schedule_set('hourly', 'jobs', 'e', 3600000)")
        done.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert not done.wait(0.5), "the second schedule_set did not wait for the first"
    first.commit()
    thread.join(10)
    assert done.is_set()
    rows = other.execute("SELECT name, convert_from(content, 'UTF8') FROM lonnymq.schedule ORDER BY name").fetchall()
    assert rows == [("hourly", "e"), ("nightly", "c")]
