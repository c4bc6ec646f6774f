"""A dequeue stays bounded while another session holds an old snapshot
(issue "Rebuild the dequeue…", target 3; the full 150-second figures are
`make bench`'s held-snapshot scenario).

An old snapshot keeps VACUUM, HOT pruning and the index's dead-entry hints
from removing anything that died after it, so every message consumed since
stays in `message_ready_ix` (and its lock's expiry in `message_due_ix`), in
front of the live ones.  A take starts at the position mark, which dequeues
raise as they consume (doc/dequeue-design.md, "Marks"): what it walks is the
messages consumed since the last raises, not since the snapshot.  (0.7.0's
floor, raised once a second behind, made the same take read about fifty
times as many buffers after 40 s of a hold; test_position_marks.py holds a
snapshot over single-session loads, backlog and near empty.)

Workers create and consume on one channel with a standing backlog; a probe
connection runs `EXPLAIN (ANALYZE, BUFFERS)` of one dequeue as the workers
call it, in a transaction it rolls back, several times before a REPEATABLE
READ transaction with an xid takes its snapshot and several times at the
end of the hold, and compares the medians.

A probe whose dequeue has the marks' turn (one in 8 deliveries or so, more
on a busy machine, where raises are put off while a producer of the
previous epoch is in flight) also raises the marks, and the raise reads
the ready index from the same mark as the take: it walks the same dead
entries once more.  So each probe is sorted by whether the marks moved
while it ran (marks_delivered_seq, which a raise sets outside the
transaction, changed): the take alone, the median of the probes during
which nothing raised, must stay within 3x; a probe that raised reads the
walk twice, and the median of those (when three or more) must stay within
twice that.  (CI once saw the median of all nine probes at the end of a
hold at 3.04x, 82 buffers against 27, because most of them had raised;
growth with the traffic since the snapshot would be thousands.)
"""

from __future__ import annotations

import json
import statistics
import threading
import time

import psycopg
import pytest

from lonnymq_dev.calls import dequeue

WORKERS = 4
BACKLOG = 5_000
WARMUP_S = 3.0
HOLD_S = 20.0
PROBES = 9
MAX_PROBES = 40
PROBE_EVERY_S = 0.3


_RAISED_SQL = "SELECT pg_catalog.pg_sequence_last_value('lonnymq.marks_delivered_seq')"


def _probe(conn, limit: int) -> tuple[int, bool]:
    """Shared buffers (hit + read) of one dequeue, rolled back, and whether
    the marks were raised while it ran (by it or by a worker)."""
    raised_before = conn.execute(_RAISED_SQL).fetchone()[0]
    with conn.transaction(force_rollback=True):
        plan = conn.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM lonnymq.message_dequeue(30000, {limit})"
        ).fetchone()[0]
    top = (plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]
    was_raised = conn.execute(_RAISED_SQL).fetchone()[0] != raised_before
    return top["Shared Hit Blocks"] + top["Shared Read Blocks"], was_raised


def _probes(conn, limit: int) -> tuple[float, list[int]]:
    """The median of the probes during which the marks stayed (PROBES of
    them, or at least half as many in MAX_PROBES tries: with 50 a call,
    every worker's call raises), and the buffers of the probes during
    which they were raised."""
    took, raised = [], []
    while len(took) < PROBES and len(took) + len(raised) < MAX_PROBES:
        buffers, was_raised = _probe(conn, limit)
        (raised if was_raised else took).append(buffers)
        time.sleep(PROBE_EVERY_S)
    assert len(took) >= PROBES // 2 + 1, (
        f"the marks were raised during {len(raised)} of {len(took) + len(raised)} probes")
    return statistics.median(took), raised


@pytest.mark.parametrize("limit", [1, 50])
def test_a_held_snapshot_does_not_grow_what_a_dequeue_reads(db, limit):
    with db.connect() as conn:
        conn.execute(
            "SELECT count(*) FROM lonnymq.message_create_batch('held', array_fill('m'::bytea, ARRAY[%s]))",
            (BACKLOG,),
        )
    stop = threading.Event()
    consumed = [0] * WORKERS
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            with db.connect() as conn:
                while not stop.is_set():
                    conn.execute(
                        "SELECT count(*) FROM lonnymq.message_create_batch('held', array_fill('m'::bytea, ARRAY[%s]))",
                        (limit,),
                    )
                    rows = dequeue(conn, 30000, limit=limit)
                    if rows:
                        conn.execute(
                            "SELECT lonnymq.message_complete_batch(%s::bigint[], %s::integer[])",
                            ([r[0] for r in rows], [r[1] for r in rows]),
                        )
                    consumed[k] += len(rows)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(WORKERS)]
    holder = None
    with db.connect() as probe:
        for t in threads:
            t.start()
        try:
            time.sleep(WARMUP_S)
            before, _ = _probes(probe, limit)
            holder = psycopg.connect(db.dsn, autocommit=False)
            holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            holder.execute("SELECT count(*) FROM pg_class")
            holder.execute("SELECT txid_current()")
            at_snapshot = sum(consumed)
            time.sleep(HOLD_S)
            after, after_raised = _probes(probe, limit)
            during_hold = sum(consumed) - at_snapshot
            dead = probe.execute(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = 'lonnymq' AND relname = 'message'"
            ).fetchone()[0]
        finally:
            stop.set()
            for t in threads:
                t.join()
            if holder is not None:
                holder.rollback()
                holder.close()
    assert not errors, errors
    print(f"\nheld snapshot, limit {limit}: {during_hold} messages consumed in {HOLD_S:.0f} s of the hold "
          f"({dead} dead message versions); buffers per dequeue, medians of the probes that raised no marks: "
          f"{before:.0f} before, {after:.0f} at the end ({after / before:.2f}x); at the end, the probes "
          f"during which the marks were raised: {sorted(after_raised)}")
    # The hold did what an old snapshot does: the consumed head stayed.
    assert during_hold >= 2_000, f"only {during_hold} messages consumed during the hold: nothing to walk"
    assert after <= 3 * before, (
        f"a dequeue read {after:.0f} buffers at the end of a {HOLD_S:.0f}-second hold, {before:.0f} before it")
    # A raise walks from the same mark as the take (see the module's doc);
    # a median, as for the others (a probe now and then reads hundreds of
    # buffers, before a hold as during one).
    if len(after_raised) >= 3:
        raised = statistics.median(after_raised)
        assert raised <= 2 * 3 * before, (
            f"a dequeue that raised the marks read {raised:.0f} buffers at the end of the hold (median), "
            f"{before:.0f} before it")
