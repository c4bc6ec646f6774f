"""message_complete_dequeue (0.10.0) from real connections: the NOTICE that
reports each refused complete, and workers that complete and fetch in one
call, concurrently, losing nothing and completing nothing twice.  (Its
contract, limits, fairness and bad input: test/pgtap/220_complete_dequeue.sql;
killed workers and a server crash: test_faults.py; the mix: test_soak.py.)"""

from __future__ import annotations

import threading

import psycopg
import pytest

from conftest import REFUSED_COMPLETE, collect_refused
from lonnymq_dev.calls import complete_dequeue

COLUMNS = "id, num_attempts, channel"


def _notices(conn) -> list:
    """Each notice the connection receives, as (severity, sqlstate, message,
    detail): read in the handler, since psycopg frees a Diagnostic after it."""
    got: list = []
    conn.add_notice_handler(lambda d: got.append((d.severity, d.sqlstate, d.message_primary, d.message_detail)))
    return got


def test_each_refused_complete_is_a_notice_naming_it(db):
    with db.connect(autocommit=True) as conn:
        notices = _notices(conn)
        conn.execute("SELECT lonnymq.message_create('n', convert_to('m' || g, 'UTF8')) FROM generate_series(1, 3) AS g")
        (a, ta, _), (b, tb, _) = complete_dequeue(conn, None, limit=2, columns=COLUMNS)
        assert notices == []

        rows = complete_dequeue(conn, [(a, ta), (b, tb + 1), (424242, 1)], columns=COLUMNS)
        assert len(rows) == 1, "the call still delivers"
        refused = [n for n in notices if n[1] == REFUSED_COMPLETE]
        assert [n[3] for n in refused] == [f"id={b} num_attempts={tb + 1}", "id=424242 num_attempts=1"]
        assert all(n[0] == "NOTICE" and "was not completed" in n[2] for n in refused)
        locked = dict(conn.execute("SELECT id, is_locked FROM lonnymq.message").fetchall())
        assert a not in locked, "the good pair was completed"
        assert locked[b] is True, "the stale one keeps its lock"

        # Nothing refused: no notice.
        notices.clear()
        complete_dequeue(conn, [(b, tb)], columns=COLUMNS)
        assert notices == []


def test_concurrent_workers_complete_every_message_exactly_once(db):
    """Six workers, each its own connection, loop on message_complete_dequeue
    over 12 channels (two limited to one message at a time), completing each
    message with their next call: every message is delivered once, completed
    once, and a sampler never sees two of a limited channel locked at once."""
    channels = [f"w{i}" for i in range(10)] + ["one_a", "one_b"]
    per_channel = 150
    with db.connect(autocommit=True) as conn:
        for name in ("one_a", "one_b"):
            conn.execute("SELECT lonnymq.channel_set(%s, p_max_concurrency => 1)", (name,))
        for name in channels:
            conn.execute("SELECT count(lonnymq.message_create(%s, 'x')) FROM generate_series(1, %s)",
                         (name, per_channel))
    total = len(channels) * per_channel
    delivered: list[int] = []
    completed: list[int] = []
    refusals: list = []
    overlaps: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()
    running = threading.Event()
    running.set()

    def sampler() -> None:  # the server's view: locks held in each limited channel
        with db.connect(autocommit=True) as conn:
            while running.is_set():
                for name, locks in conn.execute(
                    "SELECT c.name, count(m.id) FROM lonnymq.channel AS c "
                    "JOIN lonnymq.message AS m ON m.channel_id = c.id AND m.is_locked "
                    "WHERE c.name LIKE 'one_%' GROUP BY c.name"
                ).fetchall():
                    if locks > 1:
                        overlaps.append(f"{name}: {locks} locked")

    def worker(n: int) -> None:
        try:
            with db.connect(autocommit=True) as conn:
                refused = collect_refused(conn)
                held: list[tuple] = []
                idle = 0
                while idle < 3:
                    rows = complete_dequeue(conn, held, limit=1 + n % 3, columns=COLUMNS)
                    with lock:
                        refusals.extend(refused)
                        refused.clear()
                        completed.extend(r[0] for r in held)
                        delivered.extend(r[0] for r in rows)
                    held = rows
                    idle = idle + 1 if not rows else 0
        except psycopg.Error as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    watch = threading.Thread(target=sampler)
    watch.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    running.clear()
    watch.join(10)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert not refusals, refusals[:5]
    assert not overlaps, overlaps[:5]
    assert len(delivered) == len(set(delivered)) == total, "each message delivered once"
    assert sorted(completed) == sorted(delivered), "each delivery completed once, by the worker's next call"
    with db.connect(autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0] == 0
        assert conn.execute(
            "SELECT array_agg(num_admitted ORDER BY name) FROM lonnymq.channel WHERE name LIKE 'one_%'"
        ).fetchone()[0] == [0, 0]


FOLLOWED = [
    # (the configuration, whether a completion must follow its channel's row)
    ("SELECT lonnymq.channel_set('c', p_max_attempts => 3)", False),
    ("SELECT lonnymq.channel_set('c', p_backoff_base_ms => 10, p_backoff_factor => 3)", False),
    ("SELECT lonnymq.channel_set('c', p_dedup_window_ms => 60000)", False),
    ("SELECT lonnymq.channel_set('c', p_notify => TRUE)", False),
    ("SELECT lonnymq.channel_set('c', p_retain_history => TRUE)", True),
    ("SELECT lonnymq.channel_set('c', p_max_size => 100)", True),
    ("SELECT lonnymq.channel_set('c', p_max_concurrency => 4)", True),
    ("SELECT lonnymq.channel_set('c', p_release_interval_ms => 10)", True),
    ("SELECT lonnymq.channel_set('c', p_ordered => TRUE)", True),
    ("SELECT lonnymq.channel_pause('c')", True),
]


def _channel_reads(conn) -> int:
    """Scans of lonnymq.channel (its indexes and the table) so far in this
    session's transaction statistics."""
    return conn.execute(
        "SELECT COALESCE(sum(idx_scan), 0) + COALESCE(sum(seq_scan), 0) FROM pg_stat_xact_user_tables"
        " WHERE relid = 'lonnymq.channel'::regclass").fetchone()[0]


@pytest.mark.parametrize("configuration, followed", FOLLOWED, ids=[c.split("=>")[0].split("'c', ")[-1].strip(" )")
                                                                    for c, _ in FOLLOWED])
def test_completions_read_channel_rows_only_once_a_channel_needs_following(db, configuration, followed):
    """channel_followed_seq: a channel configured with what a producer, a take
    or a failure reads costs a completion no read of lonnymq.channel; one with
    history, max_size or a limit (concurrency, release interval, ordered, a
    pause) makes every completion in the database read the rows from then
    on, because it must count, admit or copy."""
    with db.connect(autocommit=True) as conn:
        conn.execute(configuration)
        assert conn.execute("SELECT pg_sequence_last_value('lonnymq.channel_followed_seq')").fetchone()[0] == int(followed)
        conn.execute("SELECT lonnymq.message_create('other', 'x')")
        mid, token = conn.execute("SELECT d.id, d.num_attempts FROM lonnymq.message_dequeue(60000, 1, 'other') AS d"
                                  ).fetchone()
        with conn.transaction():
            before = _channel_reads(conn)
            assert conn.execute("SELECT lonnymq.message_complete(%s, %s)", (mid, token)).fetchone()[0] is True
            reads = _channel_reads(conn) - before
        assert (reads > 0) == followed, f"{configuration}: {reads} reads of lonnymq.channel by a completion"
