"""A message that kills its worker: each killed worker's lock expires; after
max_attempts deliveries the message is in the dead letters, not looping.
"""

from __future__ import annotations

import time

import psycopg

from lonnymq_dev.calls import scalar, dequeue_one


def _kill_worker_holding(db, admin, channel: str, lock_ms: int) -> tuple[int, int]:
    worker = psycopg.connect(db.dsn, autocommit=True)
    pid = worker.info.backend_pid
    row = dequeue_one(worker, lock_ms, channel=channel)
    assert row is not None
    assert scalar(admin, "SELECT pg_terminate_backend(%s, 5000)", (pid,)) is True
    try:
        worker.close()
    except Exception:  # noqa: BLE001
        pass
    return row


def test_a_message_that_kills_its_workers_ends_in_the_dead_letters(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('poison', p_max_attempts => 2, p_max_concurrency => 4)")
    mid = scalar(admin, "SELECT lonnymq.message_create('poison', 'kills workers')")
    assert _kill_worker_holding(db, admin, "poison", 300) == (mid, 1)
    time.sleep(0.4)
    # Redelivered once (attempt 2 of 2), and that worker's lock expires too.
    row = dequeue_one(admin, 1, channel="poison", columns="id, num_attempts, is_recovered")
    assert row == (mid, 2, True)
    time.sleep(0.05)
    good = scalar(admin, "SELECT lonnymq.message_create('poison', 'fine')")
    # Its lock expired after its last attempt: the next dequeue buries it and
    # delivers the next message instead.
    row = dequeue_one(admin, channel="poison")
    assert row == (good, 1)
    dead = admin.execute(
        "SELECT num_attempts, last_error, attempt_log FROM lonnymq.dead_letter WHERE id = %s", (mid,)).fetchone()
    assert dead is not None
    assert dead[0] == 2 and dead[1] == "lock expired"
    assert [e["error"] for e in dead[2]] == ["lock expired", "lock expired"]
    assert [e["attempt"] for e in dead[2]] == [1, 2]
    counted = admin.execute(
        "SELECT c.num_admitted, (SELECT array_agg(m.id) FROM lonnymq.message AS m"
        " WHERE m.channel = 'poison' AND m.is_locked) FROM lonnymq.channel AS c WHERE c.name = 'poison'").fetchone()
    assert counted == (1, [good]), "only the good message is locked, and admitted"
    assert scalar(admin, "SELECT dead FROM lonnymq.channel_stats WHERE channel = 'poison'") == 1
