"""Several real connections at once: the two promises of the foundation.

* Eight consumers of one busy channel never come back empty-handed while
  unlocked ready messages exist (the channel row must not serialise them).
* A producer's open transaction blocks neither other producers nor the
  consumers of other channels.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from lonnymq_dev.calls import dequeue, complete

CONSUMERS = 8
BACKLOG = 4000


def test_eight_consumers_of_one_channel_never_see_it_empty(db):
    with db.connect() as conn:
        conn.execute(
            "SELECT lonnymq.message_create('busy', convert_to(g::text, 'UTF8')) FROM generate_series(1, %s) AS g",
            (BACKLOG,),
        )

    completed: list[int] = []
    wrong_empties: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(CONSUMERS)

    def consumer():
        try:
            with db.connect() as conn, conn.cursor() as cur:
                start.wait()
                while True:
                    cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 1, NULL)")
                    row = cur.fetchone()
                    if row is None:
                        # Empty: legitimate only if the other consumers can be
                        # holding every unlocked ready message right now.
                        cur.execute("SELECT count(*) FROM lonnymq.message WHERE NOT is_locked")
                        unlocked = cur.fetchone()[0]
                        if unlocked == 0:
                            return
                        if unlocked > CONSUMERS - 1:
                            with lock:
                                wrong_empties.append(unlocked)
                        continue
                    assert complete(cur, *row) is True
                    with lock:
                        completed.append(row[0])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=consumer) for _ in range(CONSUMERS)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    elapsed = time.monotonic() - began

    assert not errors, errors
    assert not wrong_empties, (
        f"{len(wrong_empties)} dequeues came back empty while at least {CONSUMERS} "
        f"unlocked ready messages existed (samples: {wrong_empties[:10]})"
    )
    assert sorted(completed) == sorted(set(completed)), "a message was completed twice"
    assert len(completed) == BACKLOG
    print(f"{BACKLOG} messages, {CONSUMERS} consumers, one channel: {BACKLOG / elapsed:.0f} completed/s")


def _quick(db, sql, params=()):
    """Run one call on a fresh connection that refuses to wait for a lock."""
    return db.call(sql, params, lock_timeout="3s")


@pytest.mark.parametrize("channel_state", ["busy", "idle", "new"])
def test_an_open_producer_transaction_blocks_no_one(db, channel_state):
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.message_create('other', 'o1'), lonnymq.message_create('other', 'o2')")
        if channel_state == "busy":
            conn.execute("SELECT lonnymq.message_create('a', 'a0')")
        elif channel_state == "idle":
            conn.execute("SELECT lonnymq.message_create('a', 'a0')")
            # (a 1 ms lock: the channel waits for its expiry, then is visited)
            conn.execute("SELECT lonnymq.message_complete(id, num_attempts) "
                         "FROM lonnymq.message_dequeue(1, 1, 'a')")
            time.sleep(0.01)
            # the consumer sees it empty: nothing of 'a' is left, not even a row
            assert conn.execute("SELECT * FROM lonnymq.message_dequeue(1000, 1, 'a')").fetchall() == []
            assert conn.execute("SELECT (SELECT count(*) FROM lonnymq.message WHERE channel = 'a'),"
                                " (SELECT count(*) FROM lonnymq.channel WHERE name = 'a')").fetchone() == (0, 0)

    producer = db.connect(autocommit=False)
    producer.execute("SELECT lonnymq.message_create('a', 'uncommitted')")
    try:
        # another producer, same channel (an existing one: two first-ever
        # creates of one new channel do wait for each other, see doc/)
        if channel_state != "new":
            assert _quick(db, "SELECT lonnymq.message_create('a', 'second')")[0][0] is not None
        # producers of other channels
        assert _quick(db, "SELECT lonnymq.message_create('other', 'o3')")[0][0] is not None
        # consumers of other channels, and of any channel
        got = _quick(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 1, 'other')")
        assert got == [("o1",)]
        got = _quick(db, "SELECT channel FROM lonnymq.message_dequeue(60000, 5)")
        assert ("other",) in got
        # the uncommitted message is invisible to consumers
        seen = _quick(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 10, 'a')")
        assert ("uncommitted",) not in seen
        # dequeues that find 'a' empty while the producer is in flight must
        # not lose its message (checked after the commit, below)
        _quick(db, "SELECT * FROM lonnymq.message_dequeue(60000, 10, 'a')")
    finally:
        producer.commit()
        producer.close()

    # once committed, the message is delivered
    seen = _quick(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 10, 'a')")
    assert ("uncommitted",) in seen


def test_a_message_committed_while_its_channel_goes_idle_is_not_lost(db):
    """The lost-wakeup race: a consumer finds the channel empty while a
    producer's message is still uncommitted.  After the commit the message
    must be delivered, whatever the interleaving."""
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.channel_set('race')")
    for round_ in range(30):
        producer = db.connect(autocommit=False)
        producer.execute("SELECT lonnymq.message_create('race', %s)", (f"r{round_}".encode(),))
        # a consumer sweeps the (apparently empty) channel several times
        for _ in range(3):
            assert _quick(db, "SELECT * FROM lonnymq.message_dequeue(60000, 1, 'race')") == []
            _quick(db, "SELECT * FROM lonnymq.message_dequeue(60000, 5)")
        producer.commit()
        producer.close()
        got = _quick(db, "SELECT id, num_attempts, convert_from(content, 'UTF8') "
                         "FROM lonnymq.message_dequeue(60000, 1, NULL)")
        assert [r[2] for r in got] == [f"r{round_}"], f"round {round_}: message lost or late"
        _quick(db, "SELECT lonnymq.message_complete(%s, %s)", got[0][:2])
        # and the consumer finds it empty again
        assert _quick(db, "SELECT * FROM lonnymq.message_dequeue(60000, 1, 'race')") == []


@pytest.mark.parametrize("holder_call", ["dequeue", "cancel"])
def test_a_message_another_consumer_holds_is_delivered_at_once_when_it_rolls_back(db, holder_call):
    """A message that another transaction holds right now (and may roll
    back) is skipped, not waited for, and keeps its place: when the holder
    rolls back it is delivered at once, not after a lock expiry (0.4.0 to
    0.10.1: its channel stayed in the rotation).  The holder is a consumer
    or a message_cancel (which holds only the message row).  By the round
    property, the held message occupies its channel's place in the current
    round: a channel that becomes ready meanwhile joins that round, and is
    served before the held message's channel's next place (the next
    round)."""
    setup = db.connect()
    setup.execute("SELECT lonnymq.message_create('x', 'x0'), lonnymq.message_create('x', 'x1'),"
                  " lonnymq.message_create('x', 'x2')")
    # x0 delivered and completed.
    setup.execute("SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000) AS d")
    holder = db.connect(autocommit=False)
    if holder_call == "dequeue":
        # The first ready message: x1, locked, uncommitted.
        held = dequeue(holder, columns="convert_from(content, 'UTF8')")
        assert held == [("x1",)]
    else:
        x1 = setup.execute("SELECT id FROM lonnymq.message WHERE content = 'x1'").fetchone()[0]
        assert holder.execute("SELECT lonnymq.message_cancel(%s)", (x1,)).fetchone()[0] is True
    setup.execute("SELECT lonnymq.message_create('y', 'y1')")
    # x1 skipped (held): y joined x1's round, x2 is in the next one.
    other = db.connect()
    other.execute("SET lock_timeout = '3s'")
    got = dequeue(other, columns="convert_from(content, 'UTF8')")
    assert got == [("y1",)]
    holder.rollback()
    delivered = []
    for _ in range(3):
        rows = dequeue(other, columns="convert_from(content, 'UTF8')")
        delivered.extend(r[0] for r in rows)
    assert delivered == ["x1", "x2"], "the rolled-back x1 is delivered at once, before x2"


def test_consumers_holding_the_front_block_no_one(db):
    """Two consumers in open transactions have each just taken the message at
    the front of one of the channels f and g, and a third channel w gets its
    first message.  A third consumer is blocked by none of them and never
    comes back empty: in three calls it gets f3, g3 (the channels without
    limits are not held by their consumers) and w1 (it joined the round)."""
    setup = db.connect()
    setup.execute("SELECT lonnymq.message_create(c, convert_to(c || g, 'UTF8')) "
                  "FROM unnest(ARRAY['f', 'g']) AS c, generate_series(1, 3) AS g")
    # f1 and g1 delivered and completed.
    for _ in range(2):
        setup.execute("SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000) AS d")
    holders = [db.connect(autocommit=False) for _ in range(2)]
    held = [dequeue(h, columns="convert_from(content, 'UTF8')")
            for h in holders]
    assert sorted(held) == [[("f2",)], [("g2",)]]
    setup.execute("SELECT lonnymq.message_create('w', 'w1')")
    got = [_quick(db, "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000)")
           for _ in range(3)]
    for h in holders:
        h.rollback()
    assert all(len(rows) == 1 for rows in got), got
    assert sorted(rows[0][0] for rows in got) == ["f3", "g3", "w1"]


def test_batch_consumers_miss_nothing_below_a_moving_mark(db):
    """Batch dequeues take from the position mark, which they raise as they
    consume (0.7.0 to 0.10.1: the channel's floor).  Consumers take batches
    from a standing backlog while producers create priority messages (negative
    dequeue_at: their channel's first place; some in REPEATABLE READ, whose
    snapshot may predate a raise).  Every message is delivered once, and each
    priority message within a few batches of its commit, not after the
    backlog (a message placed below the mark, which batches pass over, would
    never be delivered)."""
    backlog, consumers, batch, urgent_per_producer, producers = 8000, 3, 20, 25, 2
    with db.connect() as conn:
        conn.execute("SELECT count(*) FROM lonnymq.message_create_batch('fl', array_fill('n'::bytea, ARRAY[%s]))",
                     (backlog,))
        first = conn.execute("SELECT min(position) FROM lonnymq.message").fetchone()[0]
    delivered: list[int] = []  # ids in completion order
    urgent_at: dict[int, int] = {}  # urgent id -> len(delivered) when it was committed
    errors: list[BaseException] = []
    lock = threading.Lock()
    done = threading.Event()

    def producer(k: int):
        try:
            with db.connect() as conn:
                time.sleep(1.2)  # the consumers raise the mark into the backlog first
                for i in range(urgent_per_producer):
                    sql = "SELECT lonnymq.message_create('fl', 'u', %s)"
                    if k == 0 and i % 3 == 0:
                        with conn.transaction():
                            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                            mid = conn.execute(sql, (-i,)).fetchone()[0]
                    else:
                        mid = conn.execute(sql, (-i,)).fetchone()[0]
                    with lock:
                        urgent_at[mid] = len(delivered)
                    time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def consumer():
        try:
            with db.connect() as conn, conn.cursor() as cur:
                while not done.is_set():
                    cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, %s)", (batch,))
                    rows = cur.fetchall()
                    if not rows:
                        time.sleep(0.01)
                        continue
                    time.sleep(0.03)  # the work: the backlog lasts longer than the producers
                    cur.execute("SELECT lonnymq.message_complete_batch(%s::bigint[], %s::integer[])",
                                ([r[0] for r in rows], [r[1] for r in rows]))
                    assert cur.fetchone()[0] == len(rows)
                    with lock:
                        delivered.extend(r[0] for r in rows)
                        if len(delivered) == backlog + producers * urgent_per_producer:
                            done.set()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(producers)]
    threads += [threading.Thread(target=consumer) for _ in range(consumers)]
    for t in threads:
        t.start()
    done.wait(timeout=120)
    done.set()
    for t in threads:
        t.join(timeout=30)

    assert not errors, errors
    assert len(delivered) == len(set(delivered)), "a message was delivered twice"
    assert len(delivered) == backlog + producers * urgent_per_producer, "messages were never delivered"
    position = {mid: n for n, mid in enumerate(delivered)}
    late = {mid: position[mid] - at for mid, at in urgent_at.items() if position[mid] - at > 3 * consumers * batch}
    assert not late, (
        f"{len(late)} of {len(urgent_at)} priority messages came after more than {3 * consumers * batch} "
        f"others delivered since their commit (the worst: {max(late.values())}): batches passed them over"
    )
    mark, = db.call("SELECT last_value FROM lonnymq.position_mark_seq")[0]
    assert mark > first, "no batch raised the mark into the backlog: the test did not exercise it"
