"""pg_dump and restore into a new database: the queue comes back whole.

lonnymq's tables are extension members; without pg_extension_config_dump
their rows would silently vanish from a dump."""

from __future__ import annotations

import subprocess
import uuid

import psycopg

from lonnymq_dev.calls import complete, dequeue, dequeue_one
from lonnymq_dev.limits import HOUR_MS

TABLES = ("channel", "channel_quota", "message", "access_grant")
# The message ids, and the delivery's marks and epoch (doc/dequeue-design.md):
# a mark restored lower only costs scans, but one restored higher than the
# positions of the restored messages would hide them from every take.
SEQUENCES = ("message_id_seq", "position_bound_seq", "position_mark_seq", "due_mark_seq", "epoch_at_seq")


def snapshot(conn):
    tables = {t: conn.execute(f"SELECT * FROM lonnymq.{t} ORDER BY 1, 2").fetchall() for t in TABLES}
    sequences = {s: conn.execute(f"SELECT last_value, is_called FROM lonnymq.{s}").fetchone() for s in SEQUENCES}
    return tables | sequences


def conn_states(db):
    """How many messages are in each delivery state (a wake, schedule '', is
    no message: the one slow's delivery left, due when its interval ends)."""
    return db.call(
        "SELECT lonnymq._message_state(m), count(*) FROM lonnymq.message AS m"
        " WHERE m.schedule IS DISTINCT FROM '' GROUP BY 1")


def test_dump_and_restore_keep_every_message_state_limit_and_sequence(db):
    cluster = db.cluster
    with db.connect() as conn:
        initial = snapshot(conn)
        # work done before: the dequeues raised the marks and began new epochs
        conn.execute("SELECT count(*) FROM lonnymq.message_create_batch('warm', array_fill('w'::bytea, ARRAY[40]))")
        while rows := dequeue(conn, limit=1, channel="warm"):
            complete(conn, *rows[0])
        conn.execute("SELECT lonnymq.channel_set('limited', 2, 50, 0)")
        conn.execute("SELECT lonnymq.channel_set('slow', p_release_interval_ms => 3600000)")
        for i in range(5):
            conn.execute("SELECT lonnymq.message_create('plain', %s)", (f"p{i}".encode(),))
        for i in range(2):
            conn.execute("SELECT lonnymq.message_create('limited', %s)", (f"l{i}".encode(),))
        conn.execute("SELECT lonnymq.message_create('slow', 's1'), lonnymq.message_create('slow', 's2')")
        conn.execute("SELECT lonnymq.message_create('scheduled', 'later', lonnymq.to_epoch(now()) + 3600000)")
        # locked: two from the limited channel (saturating it: its next three
        # messages are held at create), one plain
        locked = dequeue(conn, HOUR_MS, limit=2, channel="limited")
        for i in range(2, 5):
            conn.execute("SELECT lonnymq.message_create('limited', %s)", (f"l{i}".encode(),))
        locked += dequeue(conn, HOUR_MS, channel="plain")
        conn.execute("SELECT * FROM lonnymq.message_dequeue(3600000, 1, 'slow')")
        # deferred with state
        d = dequeue_one(conn, HOUR_MS, channel="plain")
        assert conn.execute("SELECT lonnymq.message_defer(%s, %s, lonnymq.to_epoch(now()) + 3600000, 'st')",
                            d).fetchone()[0]
        # an idle channel given a future message
        conn.execute("SELECT lonnymq.message_create('idle', 'x')")
        got = dequeue_one(conn, channel="idle")
        complete(conn, *got)
        conn.execute("SELECT * FROM lonnymq.message_dequeue(60000, 1, 'idle')")
        conn.execute("SELECT lonnymq.message_create('idle', 'tomorrow', lonnymq.to_epoch(now()) + 86400000)")
        before = snapshot(conn)
        max_id = conn.execute("SELECT max(id) FROM lonnymq.message").fetchone()[0]
    assert all(before[s] != initial[s] for s in SEQUENCES), "the set-up should move every sequence"
    states = {name: n for name, n in conn_states(db)}
    # held: limited's l2 to l4, and slow's s2 until its interval ends
    assert states == {"placed": 3, "locked": 4, "scheduled": 3, "held": 4}, \
        f"the set-up should leave messages in every state: {states}"

    dump = cluster.base_dir / f"{db.name}.dump"
    subprocess.run([str(cluster.bindir / "pg_dump"), "-Fc", "-f", str(dump), *cluster.client_args(db.name)],
                   check=True, env=cluster.client_env(), capture_output=True)
    restored = f"restored_{uuid.uuid4().hex[:12]}"
    cluster.psql(f'CREATE DATABASE "{restored}"')
    try:
        proc = subprocess.run([str(cluster.bindir / "pg_restore"), "--exit-on-error",
                               *cluster.client_args(restored), str(dump)],
                              env=cluster.client_env(), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        with psycopg.connect(cluster.dsn(restored), autocommit=True) as conn:
            assert snapshot(conn) == before, "the restored queue differs from the dumped one"
            # ids continue without collision
            new_id = conn.execute("SELECT lonnymq.message_create('plain', 'after restore')").fetchone()[0]
            assert new_id > max_id
            # locked messages are still locked, their tokens still valid
            assert complete(conn, *locked[0]) is True
            assert conn.execute("SELECT lonnymq.message_heartbeat(%s, %s, 1000)", locked[2]).fetchone()[0] is True
            # the limited channel had 2 locked; one completed: exactly one slot
            got = conn.execute("SELECT channel, convert_from(content, 'UTF8') FROM "
                               "lonnymq.message_dequeue(60000, 10, 'limited')").fetchall()
            assert got == [("limited", "l2")]
            # the rate-limited channel waits its hour; the scheduled message waits
            assert dequeue(conn, limit=10, channel="slow", columns="*") == []
            assert dequeue(conn, limit=10, channel="scheduled", columns="*") == []
            # everything ready is delivered as before: the rest of plain, then the new one
            rest = [r[0] for r in conn.execute("SELECT convert_from(content, 'UTF8') FROM "
                                               "lonnymq.message_dequeue(60000, 100)").fetchall()]
            assert sorted(rest) == ["after restore", "p2", "p3", "p4"]
            # the quota survived: max_size 50 with 4 held (5 created, 1 completed)
            assert conn.execute("SELECT q.num_created - c.num_removed FROM lonnymq.channel_quota q "
                                "JOIN lonnymq.channel c ON c.id = q.channel_id WHERE c.name = 'limited'"
                                ).fetchone() == (4,)
    finally:
        cluster.psql(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)')
        dump.unlink(missing_ok=True)
