"""A lonnymq 0.1.0 queue in every state, built with the 0.1.0 API only, and the
tools to compare it before and after `ALTER EXTENSION lonnymq UPDATE`.

load() builds the queue on an autocommit psycopg connection to a database
where `CREATE EXTENSION lonnymq VERSION '0.1.0'` was run, and returns the
fencing tokens it kept (Loaded).  check_every_state() proves that each state
the upgrade must carry over is really there, so that the upgrade tests cannot
pass on a queue that silently lost one of them.

Channels (HOUR = one hour in ms; every time-dependent state is at least an
hour away or already past, so nothing changes state while the tests run):

    plain         no limits: FIFO messages, two created in one transaction, two
                  priority messages (dequeue_at -1000 and 0), a future one, two
                  live locks (p1, p2), an expired lock (p5), a message deferred
                  an hour with state (p3) and one deferred to "now" with state (p4)
    conc          max_concurrency 2, saturated by two live locks, two ready
    conc1         max_concurrency 1, saturated by an expired lock (k1), one ready
    sized         max_size 3, full (a 4th create returned NULL), one locked
    roomy         max_size 10, one completed (num_removed 1), two ready
    slow          release_interval_ms HOUR, served once (w1 locked), two waiting
    capped        all three limits, created by channel_set, its messages never
                  served (its wake-up pending)
    idle_set      channel_set only, never used
    future        served, then found with only a message an hour away:
                  waiting (wait_at = next_at = that message's dequeue_at)
    emptied       served, then found empty: out of the rotation
    woken         found empty, then a new message: a wake-up due now
    woken_future  found empty, then a message an hour away: a wake-up due then
    newborn       created by its first message: a wake-up due now

Roles (ROLE_OPS, cluster-wide, dropped by the caller): one per access set, one
with two sets, one with a set revoked, and GONE_ROLE, granted and then dropped,
which leaves a stale row in lonnymq.access_grant.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from lonnymq_dev.limits import BIGINT_MAX, HOUR_MS

HOUR = HOUR_MS
FAR = 600_000  # "far in the future / past" threshold for the checks: 10 minutes
MAX_BIGINT = BIGINT_MAX

# (operation, role, access set), applied in this order with grant_access /
# revoke_access, before the upgrade and on the fresh install it is compared with.
ROLE_OPS: tuple[tuple[str, str, str], ...] = (
    ("grant", "lmq_upg_app", "producer"),
    ("grant", "lmq_upg_worker", "consumer"),
    ("grant", "lmq_upg_ops", "admin"),
    ("grant", "lmq_upg_both", "producer"),
    ("grant", "lmq_upg_both", "consumer"),
    ("grant", "lmq_upg_was", "producer"),
    ("grant", "lmq_upg_was", "consumer"),
    ("revoke", "lmq_upg_was", "consumer"),
)
GONE_ROLE = "lmq_upg_gone"
ROLES: tuple[str, ...] = tuple(dict.fromkeys(r for _, r, _ in ROLE_OPS)) + (GONE_ROLE,)


@dataclass
class Loaded:
    """What load() kept: fencing tokens (id, num_attempts) by message content."""

    tokens: dict[str, tuple[int, int]] = field(default_factory=dict)
    expired: tuple[str, ...] = ("p5", "k1")
    ids: dict[str, int] = field(default_factory=dict)


def create_roles(conn) -> None:
    for role in ROLES:
        conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))


def drop_roles(conn) -> None:
    for role in ROLES:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def apply_role_ops(conn) -> None:
    for op, role, access in ROLE_OPS:
        fn = "grant_access" if op == "grant" else "revoke_access"
        conn.execute(f"SELECT lonnymq.{fn}(%s, %s)", (role, access))


def _clock(conn) -> int:
    return conn.execute("SELECT lonnymq.to_epoch(clock_timestamp())").fetchone()[0]


def load(conn, roles: bool = True) -> Loaded:
    """Fill a lonnymq 0.1.0 database (autocommit connection, superuser).  With
    roles=False the roles and grants are left out (to replay the same queue on
    another database of the cluster, where the roles exist already)."""
    loaded = Loaded()

    def create(channel: str, content: str, at: int | None = None):
        mid = conn.execute(
            "SELECT lonnymq.message_create(%s, %s, %s)", (channel, content.encode(), at)
        ).fetchone()[0]
        if mid is not None:
            loaded.ids[content] = mid
        return mid

    def take(channel: str, lock_ms: int, expect: list[str]) -> list[tuple[int, int]]:
        rows = conn.execute(
            "SELECT id, num_attempts, convert_from(content, 'UTF8') "
            "FROM lonnymq.message_dequeue(%s, %s, %s)",
            (lock_ms, max(len(expect), 1), channel),
        ).fetchall()
        got = [r[2] for r in rows]
        assert got == expect, f"setting up {channel!r}: dequeued {got}, expected {expect}"
        for mid, attempts, content in rows:
            loaded.tokens[content] = (mid, attempts)
        return [(r[0], r[1]) for r in rows]

    def complete(content: str) -> None:
        ok = conn.execute("SELECT lonnymq.message_complete(%s, %s)", loaded.tokens[content]).fetchone()[0]
        assert ok, f"setting up: completing {content} failed"

    def defer(content: str, at: int | None, state: bytes) -> None:
        ok = conn.execute(
            "SELECT lonnymq.message_defer(%s, %s, %s, %s)", (*loaded.tokens[content], at, state)
        ).fetchone()[0]
        assert ok, f"setting up: deferring {content} failed"

    def served_then_nothing(channel: str, first: str, then: tuple[str, int] | None) -> None:
        """Serve one message, complete it, optionally add one more (content,
        dequeue_at), then let a consumer find nothing deliverable."""
        create(channel, first)
        take(channel, HOUR, [first])
        complete(first)
        if then is not None:
            create(channel, then[0], then[1])
        take(channel, HOUR, [])

    # Roles, one per access set and a few histories (see ROLE_OPS).
    if roles:
        create_roles(conn)
        apply_role_ops(conn)
        conn.execute("SELECT lonnymq.grant_access(%s, 'admin')", (GONE_ROLE,))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(GONE_ROLE)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(GONE_ROLE)))

    # Channels with limits.
    conn.execute("SELECT lonnymq.channel_set('conc', 2)")
    conn.execute("SELECT lonnymq.channel_set('conc1', 1)")
    conn.execute("SELECT lonnymq.channel_set('sized', NULL, 3)")
    conn.execute("SELECT lonnymq.channel_set('roomy', NULL, 10)")
    conn.execute("SELECT lonnymq.channel_set('slow', NULL, NULL, %s)", (HOUR,))
    conn.execute("SELECT lonnymq.channel_set('capped', 3, 5, %s)", (HOUR,))
    conn.execute("SELECT lonnymq.channel_set('idle_set')")

    # plain: live locks, deferrals, and an expired lock (taken last: no later
    # dequeue of this channel may recover it during the set-up).
    create("plain", "p1")
    create("plain", "p2")
    take("plain", HOUR, ["p1", "p2"])
    create("plain", "p3")
    take("plain", HOUR, ["p3"])
    defer("p3", _clock(conn) + HOUR, b"state-later")
    create("plain", "p4")
    take("plain", HOUR, ["p4"])
    create("plain", "p5")
    take("plain", 1, ["p5"])
    time.sleep(0.005)  # p4's new dequeue_at is after p5's lock expiry: p5 is delivered first
    defer("p4", None, b"state-now")  # p4's token is stale from here on: not locked

    # conc: saturated by live locks; conc1: saturated by an expired lock.
    for c in ("c1", "c2", "c3", "c4"):
        create("conc", c)
    take("conc", HOUR, ["c1", "c2"])
    create("conc1", "k1")
    create("conc1", "k2")
    take("conc1", 1, ["k1"])

    # sized: full; roomy: room left and one removal counted.
    for s in ("s1", "s2", "s3"):
        assert create("sized", s) is not None
    assert create("sized", "s4") is None, "setting up: a 4th message in a max_size 3 channel"
    take("sized", HOUR, ["s1"])
    for r in ("r1", "r2", "r3"):
        create("roomy", r)
    take("roomy", HOUR, ["r1"])
    complete("r1")

    # slow: served once, the rest waits for its release interval.
    for w in ("w1", "w2", "w3"):
        create("slow", w)
    take("slow", HOUR, ["w1"])

    # Channels a consumer found with nothing deliverable.
    served_then_nothing("future", "f0", ("f1", _clock(conn) + HOUR))
    served_then_nothing("emptied", "e0", None)
    served_then_nothing("woken", "g0", None)
    served_then_nothing("woken_future", "h0", None)

    # From here on no dequeue: the wake-ups below stay pending.
    create("plain", "p6")
    create("plain", "p7")
    with conn.transaction():  # one transaction: one dequeue_at, id order
        create("plain", "p8")
        create("plain", "p9")
    create("plain", "p-urgent", -1000)
    create("plain", "p-zero", 0)
    create("plain", "p-future", _clock(conn) + HOUR)
    for x in ("x1", "x2", "x3", "x4"):
        create("capped", x)
    create("woken", "g1")
    create("woken_future", "h1", _clock(conn) + HOUR)
    create("newborn", "n1")
    create("newborn", "n2")

    # Let the 1 ms locks expire.
    deadline = time.monotonic() + 5
    while conn.execute(
        "SELECT count(*) FROM lonnymq.message "
        "WHERE is_locked AND dequeue_at >= lonnymq.to_epoch(clock_timestamp())"
        " AND dequeue_at < lonnymq.to_epoch(clock_timestamp()) + %s",
        (FAR,),
    ).fetchone()[0]:
        assert time.monotonic() < deadline, "setting up: the 1 ms locks do not expire"
        time.sleep(0.005)
    return loaded


def check_every_state(conn, loaded: Loaded) -> None:
    """Assert that the loaded queue holds every state the upgrade must carry."""
    now = _clock(conn)

    def channel(name: str) -> dict:
        cur = conn.execute("SELECT * FROM lonnymq.channel WHERE name = %s", (name,))
        row = cur.fetchone()
        assert row is not None, f"channel {name} missing"
        return dict(zip([d.name for d in cur.description], row))

    def message(content: str) -> dict:
        cur = conn.execute("SELECT * FROM lonnymq.message WHERE content = %s", (content.encode(),))
        row = cur.fetchone()
        assert row is not None, f"message {content} missing"
        return dict(zip([d.name for d in cur.description], row))

    def wakes(name: str) -> list[int]:
        return [r[0] for r in conn.execute(
            "SELECT w.wake_at FROM lonnymq.channel_wake AS w JOIN lonnymq.channel AS c "
            "ON c.id = w.channel_id WHERE c.name = %s", (name,))]

    problems = []

    def need(cond: bool, what: str) -> None:
        if not cond:
            problems.append(what)

    for content in ("p1", "p2", "c1", "c2", "s1", "w1"):
        m = message(content)
        need(m["is_locked"] and m["dequeue_at"] > now + FAR, f"{content}: a live lock")
    for content in loaded.expired:
        m = message(content)
        need(m["is_locked"] and m["dequeue_at"] < now, f"{content}: an expired lock")
    m = message("p3")
    need(not m["is_locked"] and m["num_attempts"] == 1 and m["state"] == b"state-later"
         and m["dequeue_at"] > now + FAR, "p3: deferred an hour with state")
    m = message("p4")
    need(not m["is_locked"] and m["num_attempts"] == 1 and m["state"] == b"state-now"
         and m["dequeue_at"] <= now, "p4: deferred to now with state")
    need(message("p-urgent")["dequeue_at"] == -1000 and message("p-zero")["dequeue_at"] == 0,
         "priority messages")
    need(message("p8")["dequeue_at"] == message("p9")["dequeue_at"], "p8, p9: one transaction")
    for content in ("p-future", "f1", "h1"):
        m = message(content)
        need(not m["is_locked"] and m["dequeue_at"] > now + FAR, f"{content}: future-dated")

    c = channel("conc")
    need(c["max_concurrency"] == 2 and c["num_locked"] == 2, "conc: saturated")
    c = channel("conc1")
    need(c["max_concurrency"] == 1 and c["num_locked"] == 1, "conc1: saturated by an expired lock")
    held = conn.execute(
        "SELECT q.num_created - c.num_removed, c.max_size FROM lonnymq.channel_quota AS q "
        "JOIN lonnymq.channel AS c ON c.id = q.channel_id WHERE c.name = 'sized'").fetchone()
    need(held == (3, 3), f"sized: at its max_size (held, max_size = {held})")
    c = channel("roomy")
    need(c["max_size"] == 10 and c["num_removed"] == 1, "roomy: one removal counted")
    c = channel("slow")
    need(c["release_interval_ms"] == HOUR and c["next_at"] is not None and c["next_at"] > now + FAR,
         "slow: waiting for its release interval")
    c = channel("capped")
    need((c["max_concurrency"], c["max_size"], c["release_interval_ms"]) == (3, 5, HOUR),
         "capped: all three limits")
    c = channel("idle_set")
    need(c["next_at"] is None, "idle_set: never in the rotation")
    c = channel("future")
    f1 = message("f1")["dequeue_at"]
    need(c["wait_at"] == f1 and c["next_at"] == f1, f"future: waiting for f1 ({c['wait_at']}, {c['next_at']})")
    for name in ("emptied", "woken", "woken_future"):
        c = channel(name)
        need(c["next_at"] is None and c["wait_at"] == MAX_BIGINT, f"{name}: out of the rotation")
    need(any(w <= now for w in wakes("woken")), "woken: a wake-up due")
    need(any(w > now + FAR for w in wakes("woken_future")), "woken_future: a wake-up due in an hour")
    need(bool(wakes("newborn")), "newborn: a wake-up pending")
    need(not wakes("emptied"), "emptied: no wake-up")
    grants = {tuple(r) for r in conn.execute("SELECT role_name, access FROM lonnymq.access_grant")}
    need((GONE_ROLE, "admin") in grants, "a grant of a role that no longer exists")
    need(("lmq_upg_was", "consumer") not in grants, "a revoked grant")
    assert not problems, "the 0.1.0 set-up is missing states:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------- snapshots

def _tables(conn) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_class AS c WHERE c.relnamespace = 'lonnymq'::regnamespace "
        "AND c.relkind IN ('r', 'p') ORDER BY c.relname")]


def _sequences(conn) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_class AS c WHERE c.relnamespace = 'lonnymq'::regnamespace "
        "AND c.relkind = 'S' ORDER BY c.relname")]


def _columns(conn, table: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT a.attname FROM pg_attribute AS a WHERE a.attrelid = %s::regclass "
        "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum", (f"lonnymq.{table}",))]


def _table_rows(conn, table: str, columns: list[str]) -> list[dict]:
    """All rows of a table as {column: value}, in primary-key order."""
    key = [r[0] for r in conn.execute(
        "SELECT a.attname FROM pg_index AS i "
        "JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k (attnum, n) ON TRUE "
        "JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
        "WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY k.n", (f"lonnymq.{table}",))]
    order = key or columns
    query = sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.Identifier("lonnymq", table),
        sql.SQL(", ").join(map(sql.Identifier, order)),
    )
    return [dict(zip(columns, row)) for row in conn.execute(query)]


def snapshot(conn) -> dict:
    """Every table of the schema (all columns) and every sequence position."""
    tables = {t: _table_rows(conn, t, _columns(conn, t)) for t in _tables(conn)}
    sequences = {
        s: conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(
            sql.Identifier("lonnymq", s))).fetchone()
        for s in _sequences(conn)
    }
    return {"tables": tables, "sequences": sequences, "columns": {t: _columns(conn, t) for t in tables}}


def project(conn, before: dict) -> tuple[dict, dict]:
    """The same tables, columns and sequences as `before`, read now (by column
    name, whatever the new column order); and what is new: {table: [columns]},
    with new tables under their name and the key None for new sequences."""
    tables, missing = {}, []
    now_tables = set(_tables(conn))
    for t, cols in before["columns"].items():
        if t not in now_tables:
            missing.append(f"table lonnymq.{t}")
            continue
        have = set(_columns(conn, t))
        gone = [c for c in cols if c not in have]
        missing += [f"column lonnymq.{t}.{c}" for c in gone]
        tables[t] = _table_rows(conn, t, [c for c in cols if c in have])
    now_seqs = set(_sequences(conn))
    missing += [f"sequence lonnymq.{s}" for s in before["sequences"] if s not in now_seqs]
    assert not missing, "the upgrade removed or renamed: " + ", ".join(missing)
    sequences = {
        s: conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(
            sql.Identifier("lonnymq", s))).fetchone()
        for s in before["sequences"]
    }
    new = {t: [c for c in _columns(conn, t) if c not in before["columns"].get(t, [])]
           for t in sorted(now_tables)}
    new = {t: cols for t, cols in new.items() if cols}
    new[None] = sorted(now_seqs - set(before["sequences"]))
    return {"tables": tables, "sequences": sequences}, new


# ---------------------------------------------------------------- delivery

DEQUEUE_COLUMNS = ("id", "channel", "content", "state", "num_attempts", "dequeue_at", "is_recovered")


def drain_order(conn, limit: int, max_calls: int = 500) -> list[list[tuple]]:
    """Dequeue (p_limit = limit, lock an hour) until nothing is ready, completing
    every delivery right away; returns the batches in delivery order."""
    batches = []
    for _ in range(max_calls):
        rows = conn.execute(
            "SELECT id, channel, convert_from(content, 'UTF8'), state, num_attempts, dequeue_at, "
            "is_recovered FROM lonnymq.message_dequeue(%s, %s)", (HOUR, limit)).fetchall()
        if not rows:
            return batches
        batches.append([tuple(r) for r in rows])
        for r in rows:
            assert conn.execute("SELECT lonnymq.message_complete(%s, %s)", (r[0], r[4])).fetchone()[0], \
                f"completing {r} failed"
    raise AssertionError(f"still delivering after {max_calls} calls")


def connect(cluster, dbname: str, **kwargs) -> psycopg.Connection:
    return psycopg.connect(cluster.dsn(dbname), autocommit=True, **kwargs)
