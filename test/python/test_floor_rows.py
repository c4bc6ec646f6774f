"""channel_floor stays small whatever the producers' isolation level (issue
"Hardening…", item 6): 0.7.0's channel_floor_mark got a row for every
message created under REPEATABLE READ or SERIALIZABLE (22,123 rows after
30 s) and kept them until a READ COMMITTED batch dequeue of that channel.

Since 0.8.0 a producer writes a floor row only for a message that may lie
below the floor (dated more than 20 ms before its clock, or below the floor
it reads in READ COMMITTED), and the next raise deletes every row it
supersedes."""

from __future__ import annotations

import pytest


def _floor_rows(conn) -> int:
    return conn.execute("SELECT count(*) FROM lonnymq.channel_floor").fetchone()[0]


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_producers_of_current_messages_write_no_floor_rows(db, isolation):
    producer = db.connect(autocommit=False)
    for _ in range(500):
        producer.execute(f"BEGIN ISOLATION LEVEL {isolation}")
        producer.execute("SELECT lonnymq.message_create('c', 'x')")
        producer.commit()
    assert _floor_rows(db.connect()) == 0


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_lowering_rows_are_deleted_by_the_next_raise(db, isolation):
    conn = db.connect()
    producer = db.connect(autocommit=False)
    # A backlog, consumed far enough that the floor is raised.
    conn.execute("SELECT count(*) FROM lonnymq.message_create_batch('c', array_fill('x'::bytea, ARRAY[200]))")
    conn.execute("SELECT pg_sleep(0.05)")
    for _ in range(20):
        conn.execute("SELECT lonnymq.message_complete(d.id, d.num_attempts) "
                     "FROM lonnymq.message_dequeue(60000, 5, 'c') AS d")
    # Producers of priority messages (dated in the past): each may lie below
    # the floor, so each writes a lowering row.
    for i in range(300):
        producer.execute(f"BEGIN ISOLATION LEVEL {isolation}")
        producer.execute("SELECT lonnymq.message_create('c', 'urgent', %s)", (-1000 - i,))
        producer.commit()
    assert _floor_rows(conn) > 100
    # Every priority message is delivered first, whatever the floor was.
    got = conn.execute("SELECT count(*) FILTER (WHERE convert_from(content, 'UTF8') = 'urgent') "
                       "FROM lonnymq.message_dequeue(60000, 300, 'c')").fetchone()[0]
    assert got == 300
    conn.execute("SELECT lonnymq.message_complete_batch(array_agg(id), array_agg(num_attempts)) "
                 "FROM lonnymq.message WHERE is_locked")
    # The READ COMMITTED consumers that follow raise the floor: the rows go.
    conn.execute("SELECT pg_sleep(0.05)")
    for _ in range(5):
        conn.execute("SELECT lonnymq.message_complete(d.id, d.num_attempts) "
                     "FROM lonnymq.message_dequeue(60000, 5, 'c') AS d")
    assert _floor_rows(conn) <= 2
