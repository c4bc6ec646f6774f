"""Batches with limits: workers dequeuing and completing in batches, with
failures, keep a channel's max_concurrency and max_size counters exact.
"""

from __future__ import annotations

import random
import threading
import time

import psycopg
import pytest

from lonnymq_dev.calls import scalar, dequeue, complete_batch


@pytest.mark.parametrize("kind", ["max_concurrency", "max_size"])
def test_batch_workers_keep_the_limit_counters_exact(db, kind):
    admin = db.connect()
    if kind == "max_concurrency":
        admin.execute("SELECT lonnymq.channel_set('lim', p_max_concurrency => 7, p_max_attempts => 3, "
                      "p_backoff_base_ms => 0)")
    else:
        admin.execute("SELECT lonnymq.channel_set('lim', p_max_size => 100000, p_max_attempts => 3, "
                      "p_backoff_base_ms => 0)")
    total = 1500
    for i in range(0, total, 500):
        admin.execute("SELECT count(*) FROM lonnymq.message_create_batch('lim', %s)", ([b"m"] * 500,))
    errors: list[BaseException] = []
    outcome = {"completed": 0, "dead": 0}
    lock = threading.Lock()

    def worker(seed: int):
        rnd = random.Random(seed)
        try:
            with psycopg.connect(db.dsn, autocommit=True) as conn:
                idle = 0
                while idle < 20:
                    rows = dequeue(conn, limit=5, channel="lim")
                    if not rows:
                        idle += 1
                        time.sleep(0.01)
                        continue
                    idle = 0
                    done = []
                    for mid, token in rows:
                        if rnd.random() < 0.2:
                            verdict = scalar(conn, "SELECT lonnymq.message_fail(%s, %s, 'flaky')", (mid, token))
                            if verdict == "dead":
                                with lock:
                                    outcome["dead"] += 1
                        else:
                            done.append((mid, token))
                    if done:
                        n = complete_batch(conn, done)
                        assert n == len(done)
                        with lock:
                            outcome["completed"] += n
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert outcome["completed"] + outcome["dead"] == total
    assert scalar(admin, "SELECT count(*) FROM lonnymq.message") == 0
    assert scalar(admin, "SELECT count(*) FROM lonnymq.dead_letter WHERE channel = 'lim'") == outcome["dead"]
    num_admitted, num_removed = admin.execute(
        "SELECT num_admitted, num_removed FROM lonnymq.channel WHERE name = 'lim'").fetchone()
    assert num_admitted == 0, "the channel is empty: nothing is admitted"
    if kind == "max_size":
        created = scalar(admin, "SELECT q.num_created FROM lonnymq.channel_quota AS q "
                                 "JOIN lonnymq.channel AS c ON c.id = q.channel_id WHERE c.name = 'lim'")
        assert created - num_removed == 0, "held = created - removed = 0"
        assert num_removed == total
