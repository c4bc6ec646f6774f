"""The invariants that the suite checks after every test
(lonnymq_dev/invariants.py) can fail: a message in no state (held and
ready, held and admitted, early without a position), and a schedule
without exactly one pending occurrence that is only scheduled, are
reported, by the Python check and by the SQL function the isolation specs
call.  The tables
do not refuse such rows (CHECK constraints cost the worker loop 4.8 %:
doc/dequeue-design.md, "A message's states"), so these checks are what
would catch a call that writes one."""

from __future__ import annotations

import time

import pytest

from lonnymq_dev.invariants import assert_nothing_below_the_marks, check_function_sql, illegal_states

ILLEGAL = [
    ("is_held = TRUE", "ready"),                   # held and ready (it has a position)
    ("position = NULL, is_held = TRUE, is_admitted = TRUE", "admitted"),
    ("position = NULL, is_locked = TRUE, is_early = TRUE", "early"),
]


@pytest.mark.parametrize("assignment, what", ILLEGAL, ids=[w for _, w in ILLEGAL])
def test_a_message_in_no_state_is_reported(db, assignment, what):
    conn = db.connect(autocommit=True)
    mid = conn.execute("SELECT lonnymq.message_create('c', 'x')").fetchone()[0]
    assert illegal_states(conn) == []
    conn.execute(check_function_sql())
    with conn.transaction(force_rollback=True):
        conn.execute(f"UPDATE lonnymq.message SET {assignment} WHERE id = %s", (mid,))
        assert illegal_states(conn) == [mid]
        with pytest.raises(AssertionError, match="in no state"):
            assert_nothing_below_the_marks(conn, what)
        assert conn.execute("SELECT in_no_state FROM lonnymq_check.below_the_marks()").fetchone()[0] == [mid]
    assert illegal_states(conn) == []


STUCK = [
    # The schedule's occurrence deleted by hand: no message would come again.
    ("DELETE FROM lonnymq.message WHERE schedule = 'beat'", "no occurrence"),
    # Its occurrence made ready, or locked, while still an occurrence.
    ("UPDATE lonnymq.message SET position = 1 WHERE schedule = 'beat'", "ready"),
    ("UPDATE lonnymq.message SET is_locked = TRUE WHERE schedule = 'beat'", "locked"),
    # A second occurrence the schedule does not point at.
    ("INSERT INTO lonnymq.message (channel_id, channel, dequeue_at, created_at, content, schedule)"
     " SELECT channel_id, channel, dequeue_at, created_at, content, schedule FROM lonnymq.message"
     " WHERE schedule = 'beat'", "stray"),
]


@pytest.mark.parametrize("change, what", STUCK, ids=[w for _, w in STUCK])
def test_a_schedule_without_exactly_one_pending_occurrence_is_reported(db, change, what):
    conn = db.connect(autocommit=True)
    conn.execute("SELECT lonnymq.schedule_set('beat', 'beats', 'b', 3600000, lonnymq.to_epoch(now()) + 3600000)")
    assert_nothing_below_the_marks(conn)
    conn.execute(check_function_sql())
    with conn.transaction(force_rollback=True):
        conn.execute(change)
        with pytest.raises(AssertionError, match="no dequeue would run again"):
            assert_nothing_below_the_marks(conn, what)
        assert conn.execute("SELECT schedules_stuck FROM lonnymq_check.below_the_marks()").fetchone()[0] == ["beat"]
    assert_nothing_below_the_marks(conn)


def test_a_held_message_behind_room_without_a_wake_is_reported(db):
    """A full channel's create holds its message at once (_channel_hold_try);
    if the room a completion frees were left unfilled with no wake to walk
    the channel again, the message would wait for ever: held_stuck names
    it, a wake of its channel silences it (a dequeue will walk it), and
    the dequeue's walk admits it."""
    conn = db.connect(autocommit=True)
    conn.execute("SELECT lonnymq.channel_set('full', p_max_concurrency => 1)")
    conn.execute("SELECT lonnymq.message_create('full', 'first')")
    first = conn.execute("SELECT d.id, d.num_attempts FROM lonnymq.message_dequeue(60000, 1, 'full') AS d").fetchone()
    held = conn.execute("SELECT lonnymq.message_create('full', 'second')").fetchone()[0]
    assert conn.execute("SELECT is_held FROM lonnymq.message WHERE id = %s", (held,)).fetchone()[0], \
        "a create into the full channel holds its message at once"
    conn.execute(check_function_sql())
    with conn.transaction(force_rollback=True):
        # room made by hand, as a walk that missed the message would leave it
        # (a limit raised: the counts stay exact, claims_wrong stays silent)
        conn.execute("UPDATE lonnymq.channel SET max_concurrency = 2 WHERE name = 'full'")
        with pytest.raises(AssertionError, match="never to be admitted"):
            assert_nothing_below_the_marks(conn)
        assert conn.execute("SELECT held_stuck FROM lonnymq_check.below_the_marks()").fetchone()[0] == [held]
        conn.execute("INSERT INTO lonnymq.message (channel_id, channel, dequeue_at, created_at, content, schedule)"
                     " SELECT id, name, 0, 0, '', '' FROM lonnymq.channel WHERE name = 'full'")
        assert_nothing_below_the_marks(conn)
    assert conn.execute("SELECT lonnymq.message_complete(%s, %s)", first).fetchone()[0] is True
    assert conn.execute("SELECT d.id FROM lonnymq.message_dequeue(60000, 1, 'full') AS d").fetchone()[0] == held


def test_a_repeatable_read_configuration_change_does_not_strand_a_message_held_at_create(db):
    """Found by test_isolation_levels[mixed] in CI: a REPEATABLE READ
    channel_set that lifts the limit waits on the channel guard for a
    producer that held its message at create, but its snapshot predates that
    producer's commit, so _channel_readmit's walk does not see the message.
    It leaves a wake (outside READ COMMITTED), which a dequeue runs 10 ms on
    and which places the message; held_stuck reports a held message in a
    channel that admits no more and has no wake."""
    setup = db.connect(autocommit=True)
    setup.execute("SELECT lonnymq.channel_set('h', p_max_concurrency => 1)")
    setup.execute("SELECT lonnymq.message_create('h', 'first')")
    setup.execute("SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'h')")
    producer = db.connect(autocommit=False)
    producer.execute("SELECT lonnymq.message_create('h', 'second')")
    admin = db.connect(autocommit=False)

    def lift() -> None:
        admin.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        admin.execute("SELECT lonnymq.channel_set('h')")
        admin.execute("COMMIT")

    import threading
    t = threading.Thread(target=lift)
    t.start()
    time.sleep(0.5)  # the admin waits on the channel guard
    producer.commit()
    t.join(10)
    assert_nothing_below_the_marks(setup, "after the change")
    got: list[str] = []
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        got = [r[0] for r in setup.execute(
            "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 1, 'h')")]
        time.sleep(0.01)
    assert got == ["second"], f"the held message was not delivered: {got}"


WAITING = [
    # An edge lost: the child would wait for a parent that never counts it down.
    ("DELETE FROM lonnymq.message_edge WHERE parent_id = %(a)s", "edge lost"),
    # A parent that does not know it has dependents: its end would resolve none.
    ("UPDATE lonnymq.message SET has_dependents = FALSE WHERE id = %(a)s", "parent unflagged"),
    # A count that is not its edges', or a child made due while it waits.
    ("UPDATE lonnymq.message_wait SET num_waiting = 3 WHERE child_id = %(c)s AND bucket = -1", "count"),
    ("UPDATE lonnymq.message SET dequeue_at = 0 WHERE id = %(c)s", "due"),
    # A bucket whose count is not its parents'.
    ("UPDATE lonnymq.message_wait SET num_waiting = num_waiting + 1 WHERE child_id = %(w)s AND bucket = 0",
     "bucket"),
]


@pytest.mark.parametrize("change, what", WAITING, ids=[w for _, w in WAITING])
def test_a_waiting_message_no_end_would_release_is_reported(db, change, what):
    """A message created with p_after (0.16.0) waits until its parents'
    ends count it down: a waiting message whose counts are not exactly its
    pending edges, or that left its waiting state, would wait for ever or
    run early; waiting_stuck names it, by the Python check and the SQL
    function."""
    conn = db.connect(autocommit=True)
    a = conn.execute("SELECT lonnymq.message_create('p', 'a')").fetchone()[0]
    b = conn.execute("SELECT lonnymq.message_create('p', 'b')").fetchone()[0]
    c = conn.execute("SELECT lonnymq.message_create('c', 'c', p_after => ARRAY[%s, %s])", (a, b)).fetchone()[0]
    wide = [r[0] for r in conn.execute("SELECT i FROM lonnymq.message_create_batch('p', array_fill('x'::bytea, ARRAY[70])) AS i")]
    w = conn.execute("SELECT lonnymq.message_create('c', 'w', p_after => %s)", (wide,)).fetchone()[0]
    assert_nothing_below_the_marks(conn)
    conn.execute(check_function_sql())
    with conn.transaction(force_rollback=True):
        conn.execute(change, {"a": a, "c": c, "w": w})
        with pytest.raises(AssertionError, match="no parent's end would release"):
            assert_nothing_below_the_marks(conn, what)
        assert conn.execute("SELECT waiting_stuck FROM lonnymq_check.below_the_marks()").fetchone()[0] == [
            w if what == "bucket" else c]
    assert_nothing_below_the_marks(conn)
