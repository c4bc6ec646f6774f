"""A dequeue whose transaction rolls back after it raised the marks leaves
nothing below them (a worker crashes, or a SERIALIZABLE commit fails, after
its dequeue).  The raise reads the queue as the dequeue's own transaction
sees it, after the dequeue's promotions and completions: a message it
promoted is ready there, a lock it completed is gone.  Rolled back, such a
message is due again, with its old key in message_due_ix."""

from __future__ import annotations

import time

from lonnymq_dev.calls import dequeue
from lonnymq_dev.invariants import assert_nothing_below_the_marks

FILLER = ("SELECT lonnymq.message_create_batch('filler', array_agg(convert_to(g::text, 'UTF8')))"
          " FROM generate_series(1, 400) AS g")


def _raise_past(db, conn) -> None:
    """Epochs that begin well after the victim became due, while nothing
    promotes it: an administrator changing the victim channel holds its
    guard (promotions skip the channel), and two dequeues of 16 from the
    filler channel raise (the due mark stays at the victim, which they see
    due); the change then rolls back."""
    admin = db.connect(autocommit=False)
    admin.execute("BEGIN")
    admin.execute("SELECT lonnymq.channel_pause('victim')")
    for _ in range(2):
        time.sleep(0.15)
        assert len(dequeue(conn, 60_000, limit=16, channel="filler")) == 16
    admin.execute("ROLLBACK")


def test_a_rolled_back_promotion_is_not_left_below_the_due_mark(db):
    conn = db.connect(autocommit=True)
    conn.execute(FILLER)
    victim = conn.execute(
        "SELECT lonnymq.message_create('victim', 'v', lonnymq.to_epoch(clock_timestamp()) + 100)").fetchone()[0]
    time.sleep(0.2)  # the victim is due
    _raise_past(db, conn)
    worker = db.connect(autocommit=False)
    worker.execute("BEGIN")
    assert len(dequeue(worker, 60_000, limit=16, channel="filler")) == 16  # promotes the victim, raises
    worker.execute("ROLLBACK")
    assert_nothing_below_the_marks(conn, "after the rolled-back dequeue")
    got = []
    for _ in range(50):
        got += [r[0] for r in dequeue(conn, 60_000, limit=100, channel="victim")]
        if got:
            break
    assert got == [victim]


def test_a_rolled_back_completion_of_an_expired_lock_is_not_left_below_the_due_mark(db):
    conn = db.connect(autocommit=True)
    conn.execute(FILLER)
    conn.execute("SELECT lonnymq.message_create('victim', 'v')")
    (mid, token), = dequeue(conn, 100, limit=1, channel="victim")  # a 100 ms lock
    time.sleep(0.2)  # expired
    _raise_past(db, conn)
    worker = db.connect(autocommit=False)
    worker.execute("BEGIN")
    rows = worker.execute(
        "SELECT d.id FROM lonnymq.message_complete_dequeue(%s, %s, 60000, 16, 'filler') AS d",
        ([mid], [token])).fetchall()
    assert len(rows) == 16
    worker.execute("ROLLBACK")
    assert_nothing_below_the_marks(conn, "after the rolled-back completion")
