"""Consumers never come back empty-handed while ready messages nobody holds
exist (DESIGN.md), on a standing backlog: eight consumers, 100,000 ready
messages, single messages and batches of 50, one channel and 64 channels.
0.7.0 returned nothing on 0.3-1% of batch calls here, whenever its floor
raise held the channel."""

from __future__ import annotations

import threading

import pytest

from lonnymq_dev.calls import dequeue

CONSUMERS = 8
BACKLOG = 100_000
CALLS = 150  # per consumer: the backlog stays far above what they take


def _fill(db, channels: int) -> None:
    per_channel = -(-BACKLOG // channels)
    with db.connect() as conn:
        for c in range(channels):
            for start in range(0, per_channel, 5_000):
                conn.execute(
                    "SELECT count(*) FROM lonnymq.message_create_batch(%s, array_fill('m'::bytea, ARRAY[%s]))",
                    (f"ch{c}", min(5_000, per_channel - start)),
                )


@pytest.mark.parametrize("channels", [1, 64])
@pytest.mark.parametrize("limit", [1, 50])
def test_no_empty_results_on_a_standing_backlog(db, channels, limit):
    _fill(db, channels)
    empties: list[int] = []
    delivered: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(CONSUMERS)

    def consumer():
        try:
            with db.connect() as conn:
                start.wait()
                for _ in range(CALLS):
                    rows = dequeue(conn, limit=limit)
                    if not rows:
                        with lock:
                            empties.append(
                                conn.execute("SELECT count(*) FROM lonnymq.message WHERE NOT is_locked").fetchone()[0]
                            )
                        continue
                    conn.execute(
                        "SELECT lonnymq.message_complete_batch(%s, %s)",
                        ([r[0] for r in rows], [r[1] for r in rows]),
                    )
                    with lock:
                        delivered.extend(r[0] for r in rows)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=consumer) for _ in range(CONSUMERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)

    assert not errors, errors
    assert not empties, f"{len(empties)} empty results with that many unlocked messages: {empties[:10]}"
    assert len(delivered) == len(set(delivered)), "a message was delivered twice"
    assert len(delivered) >= CONSUMERS * CALLS * min(limit, 2)
