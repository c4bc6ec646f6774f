"""A lonnymq 0.1.0 queue in every state, built with the 0.1.0 API only, and the
tools to compare it before and after `ALTER EXTENSION lonnymq UPDATE`.

load() builds the queue on an autocommit psycopg connection to a database
where `CREATE EXTENSION lonnymq VERSION '0.1.0'` was run, and returns the
fencing tokens it kept (Loaded).  check_every_state() proves that each state
the upgrade must carry over is really there, so that the upgrade tests cannot
pass on a queue that silently lost one of them.  snapshot() reads every table
and sequence; after the update project() reads the same by column name, and
carry() says what they must hold: unchanged, but for what an upgrade retires
or renames (RETIRED_*, 0.11.0's new data model) and the values it transforms.

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


def clock(conn) -> int:
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
    defer("p3", clock(conn) + HOUR, b"state-later")
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
    served_then_nothing("future", "f0", ("f1", clock(conn) + HOUR))
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
    create("plain", "p-future", clock(conn) + HOUR)
    for x in ("x1", "x2", "x3", "x4"):
        create("capped", x)
    create("woken", "g1")
    create("woken_future", "h1", clock(conn) + HOUR)
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
    now = clock(conn)

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


# ---------------------------------------------------------------- what the upgrades retire

# What an upgrade retires or renames, by the version that does it; every
# table, column and sequence not listed here survives every upgrade under its
# own name, with its rows' values (project() reads them so, carry() says what
# becomes of the values that an upgrade does transform).  0.8.0 moved the
# floors of 0.7.0 (channel.floor_at, the marks of channel_floor_mark) into
# channel_floor.  0.11.0 replaces the delivery model (doc/dequeue-design.md,
# "The concepts, and why each exists"): positions replace the rotation of
# channel rows, the wake-ups and the floors; admission replaces the counted
# locks; a channel's id is the hash of its name, and only a configured
# channel has a row.
RETIRED_TABLES = {
    # 0.7.0's marks of messages created under REPEATABLE READ: channel_floor
    "channel_floor_mark": "0.8.0",
    # the wake-ups of channels out of the rotation: a message that becomes
    # ready gets its place in the round order at once (message.position)
    "channel_wake": "0.11.0",
    # the per-channel floors (0.8.0): the marks, kept in sequences
    "channel_floor": "0.11.0",
}
RETIRED_SEQUENCES = {
    "channel_id_seq": "0.11.0",        # a channel's id is the hash of its name
    "channel_turn_seq": "0.11.0",      # the rotation's turns: positions
    "channel_wake_id_seq": "0.11.0",   # channel_wake's ids
    "channel_floor_id_seq": "0.11.0",  # channel_floor's ids
    # renamed channel_followed_seq, its value set from the rows (1 only once a
    # channel keeps history or has max_size or a limit): test_upgrade's
    # test_the_update_from_0_14_0_sets_the_followed_flag_from_the_channels
    "channel_row_seq": "0.15.0",
}
# (table, column): (version, the column it became or None when dropped, what
# becomes of the value: see carry()).
RETIRED_COLUMNS = {
    # 0.7.0's floors: channel_floor rows (0.8.0), then the marks (0.11.0).
    ("channel", "floor_at"): ("0.8.0", None, "dropped"),
    ("channel", "floor_checked_at"): ("0.8.0", None, "dropped"),
    # The rotation: a ready message's place is message.position.
    ("channel", "next_at"): ("0.11.0", None, "dropped"),
    ("channel", "turn"): ("0.11.0", None, "dropped"),
    ("channel", "wait_at"): ("0.11.0", None, "dropped"),
    # The last serve, kept as the time the release interval ends.
    ("channel", "last_served_at"): ("0.11.0", "release_at", "last_served_at + release_interval_ms (NULL stays NULL)"),
    # The counted locks become the admitted messages: recounted by admission.
    ("channel", "num_locked"): ("0.11.0", "num_admitted",
                                "its locks and the messages the upgrade admits, in a channel with a limit "
                                "(max_concurrency, release_interval_ms) or paused; 0 in any other"),
    ("message", "is_counted"): ("0.11.0", "is_admitted",
                                "a lock of a channel with a limit or paused, or a ready message it admits"),
}
# Columns kept under their name whose values 0.11.0 transforms (carry()):
#   channel.id, message.channel_id, message_key.channel_id,
#   channel_quota.channel_id   the hash of the channel's name (_channel_id);
#   channel.notify_payload     a channel's id as text (p_notify_payload 'id')
#                              becomes its new id; NULL and '' stay;
#   message.dequeue_at         kept, but for a ready message admitted while
#                              its channel's release interval runs: the end
#                              of the interval (release_at), when admission
#                              delivers it;
#   channel rows               a channel whose configuration is the default
#                              one (no limits, not paused, the default retry
#                              policy, no dedup window, history or
#                              notifications) has no row any more: its
#                              messages and keys stay, and what the row held
#                              besides its configuration (counts, created_at)
#                              served nothing without a limit.
CHANNEL_DEFAULTS = {
    "max_concurrency": None, "max_size": None, "release_interval_ms": 0, "is_paused": False,
    "max_attempts": None, "backoff_base_ms": 1000, "backoff_factor": 2.0, "backoff_max_ms": 3_600_000,
    "backoff_jitter": 0.1, "dedup_window_ms": 0, "retain_history": False, "notify": False,
}
SLOT_BITS = 20  # position = round * 2^20 + the low 20 bits of the channel's id


def _version(v: str) -> tuple[int, ...]:
    return tuple(map(int, v.split(".")))


def _installed(conn) -> tuple[int, ...]:
    (version,) = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'lonnymq'").fetchone()
    return _version(version)


def _retired(version: str | None, installed: tuple[int, ...]) -> bool:
    """Whether a retirement of `version` (RETIRED_*) is installed."""
    return version is not None and installed >= _version(version)


def project(conn, before: dict) -> tuple[dict, dict]:
    """The tables, columns and sequences of `before` read now, by column name
    (whatever the new column order), a renamed column under its new name and
    a retired one left out (RETIRED_*); and what is new: {table: [columns]}
    (the new names of renamed columns are not new), with new tables under
    their name and the key None for new sequences.  Anything of `before`
    that is gone and not listed as retired fails here."""
    installed = _installed(conn)

    def retired(version: str | None) -> bool:
        return _retired(version, installed)

    tables, missing = {}, []
    now_tables = set(_tables(conn))
    renamed_to: dict[str, set[str]] = {}
    for t, cols in before["columns"].items():
        if t not in now_tables:
            if not retired(RETIRED_TABLES.get(t)):
                missing.append(f"table lonnymq.{t}")
            continue
        have = set(_columns(conn, t))
        read = []
        for c in cols:
            version, into, _ = RETIRED_COLUMNS.get((t, c), (None, c, None))
            if not retired(version):
                into = c
            if into is None:
                if c in have:
                    missing.append(f"column lonnymq.{t}.{c} (listed as dropped, still there)")
                continue
            if into != c:
                renamed_to.setdefault(t, set()).add(into)
                if c in have:
                    missing.append(f"column lonnymq.{t}.{c} (listed as renamed to {into}, still there)")
            if into not in have:
                missing.append(f"column lonnymq.{t}.{c}" + (f" (renamed to {into})" if into != c else ""))
                continue
            read.append(into)
        tables[t] = _table_rows(conn, t, read)
    now_seqs = set(_sequences(conn))
    missing += [f"sequence lonnymq.{s}" for s in before["sequences"]
                if s not in now_seqs and not retired(RETIRED_SEQUENCES.get(s))]
    missing += [f"table lonnymq.{t} (listed as retired, still there)" for t in before["columns"]
                if retired(RETIRED_TABLES.get(t)) and t in now_tables]
    missing += [f"sequence lonnymq.{s} (listed as retired, still there)" for s in before["sequences"]
                if retired(RETIRED_SEQUENCES.get(s)) and s in now_seqs]
    assert not missing, "the upgrade removed or renamed what RETIRED_* does not list: " + ", ".join(missing)
    sequences = {
        s: conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(
            sql.Identifier("lonnymq", s))).fetchone()
        for s in before["sequences"] if s in now_seqs
    }
    new = {t: [c for c in _columns(conn, t)
               if c not in before["columns"].get(t, []) and c not in renamed_to.get(t, set())]
           for t in sorted(now_tables)}
    new = {t: cols for t, cols in new.items() if cols}
    new[None] = sorted(now_seqs - set(before["sequences"]))
    return {"tables": tables, "sequences": sequences}, new


def carry(conn, before: dict, now: int) -> dict:
    """What the upgrades make of the rows of `before`: those to 0.11.0
    (_carry_admission), then the one to 0.15.0 (_carry_occurrences and
    _carry_claims; its
    rename of channel_row_seq, whose value is set from the rows, is
    test_upgrade's test_the_update_from_0_14_0_sets_the_followed_flag_from_the_channels)."""
    carried = _carry_claims(conn, before, _carry_occurrences(conn, before, _carry_admission(conn, before, now)))
    installed = _installed(conn)
    sequences = {s: v for s, v in carried["sequences"].items() if not _retired(RETIRED_SEQUENCES.get(s), installed)}
    return {"tables": carried["tables"], "sequences": sequences}


def _occurrence_row(schedule: dict) -> dict:
    """A schedule's pending occurrence (0.15.0), every column of the message
    the upgrade writes, from the schedule's row as the upgrade left it."""
    return {
        "id": schedule["occurrence_id"], "channel_id": schedule["channel_id"], "dequeue_at": schedule["next_at"],
        "created_at": schedule["set_at"], "content": schedule["content"], "channel": schedule["channel"],
        "is_locked": False, "num_attempts": 0, "state": None, "key": None, "attempt_log": None,
        "is_admitted": False, "locked_by": None, "num_failures": 0, "position": None, "is_held": False,
        "is_early": False,
    }


def _carry_occurrences(conn, before: dict, carried: dict) -> dict:
    """The upgrade to 0.15.0 gives each schedule its pending occurrence: one
    message per schedule (message.schedule, not in `before`, names it), at
    its next_at, created at its set_at, with an id from message_id_seq
    (the sequence moves on by one per schedule).  The ids and set_at are
    read from the upgraded schedule rows (their own comparison checks
    set_at); the ids must be the sequence's next ones."""
    if "schedule" in before["columns"]["message"] or not conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'lonnymq.message'::regclass"
            " AND attname = 'schedule')").fetchone()[0]:
        return carried
    names = [s["name"] for s in before["tables"].get("schedule", [])]
    upgraded = {r[0]: {"occurrence_id": r[1], "set_at": r[2], "next_at": r[3], "channel": r[4], "content": r[5],
                       "channel_id": r[6]}
                for r in conn.execute("SELECT name, occurrence_id, set_at, next_at, channel, content,"
                                      " pg_catalog.hashtextextended(channel, 0) FROM lonnymq.schedule"
                                      " WHERE name = ANY(%s)", (names,)).fetchall()}
    last, _ = carried["sequences"]["message_id_seq"]
    columns = list(carried["tables"]["message"][0]) if carried["tables"]["message"] else []
    messages = list(carried["tables"]["message"])
    for name in names:
        schedule = upgraded[name]
        assert last < schedule["occurrence_id"] <= last + len(names), (name, schedule["occurrence_id"], last)
        row = _occurrence_row(schedule)
        messages.append({c: row[c] for c in columns})
    tables = dict(carried["tables"], message=messages)
    sequences = dict(carried["sequences"])
    if names:
        sequences["message_id_seq"] = (last + len(names), True)
    return {"tables": tables, "sequences": sequences}


def _carry_claims(conn, before: dict, carried: dict) -> dict:
    """The upgrade to 0.15.0 makes a channel with max_concurrency and no
    release interval, pause or order claim at the take: its locks hold its
    claims (is_admitted, counted in num_admitted), nothing else is admitted,
    and its held messages are placed.  Where the upgrade placed them (each
    channel's next rounds, and whether early) is read from the upgraded
    rows: it must have placed every one."""
    if "is_limited" in before["columns"]["message"] or not conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'lonnymq.message'::regclass"
            " AND attname = 'is_limited')").fetchone()[0]:
        return carried
    claims = {c["id"] for c in carried["tables"]["channel"]
              if c.get("max_concurrency") is not None and not c.get("release_interval_ms")
              and not c.get("is_paused") and not c.get("is_ordered") and c.get("prefix") is None}
    placed = {r[0]: (r[1], r[2]) for r in conn.execute(
        "SELECT id, position, is_early FROM lonnymq.message WHERE is_limited AND position IS NOT NULL").fetchall()}
    messages = []
    for m in carried["tables"]["message"]:
        # (Only the columns the old version had are compared.)
        if m["channel_id"] in claims and "is_admitted" in m:
            m = dict(m, is_admitted=m["is_locked"])
            if m.get("is_held"):
                assert m["id"] in placed, f"the upgrade left {m} held"
                m["is_held"] = False
                m.update({k: v for k, v in zip(("position", "is_early"), placed[m["id"]]) if k in m})
        messages.append(m)
    channels = [dict(c, num_admitted=sum(m["is_locked"] for m in messages if m["channel_id"] == c["id"]))
                if c["id"] in claims and "num_admitted" in c else c for c in carried["tables"]["channel"]]
    return {"tables": dict(carried["tables"], message=messages, channel=channels),
            "sequences": carried["sequences"]}


def _carry_admission(conn, before: dict, now: int) -> dict:
    """What the upgrade to 0.11.0 makes of the rows of `before` (read by
    snapshot() under 0.10.1 or older), by the rules above, in project()'s
    shape: the expected projection of the upgraded database.  `now` is any
    clock reading around the update: ready means dequeue_at <= now (the
    scenarios keep every time at least FAR from it).  The admission of a
    channel with limits is recomputed here from the 0.11.0 rules
    (doc/dequeue-design.md, "Limits as admission"), independently of the
    upgrade script: its locks are admitted; then, unless it is paused, its
    ready messages in (dequeue_at, id) order while it has room
    (max_concurrency - its locks; one with a release interval, which
    schedules it at release_at while that is ahead); the others are held.
    From 0.11.0 on (message.position exists), the upgrades change functions
    only: every row is kept as it is."""
    if "position" in before["columns"]["message"]:
        return {"tables": before["tables"], "sequences": before["sequences"]}
    tables = {t: [dict(r) for r in rows] for t, rows in before["tables"].items() if t not in RETIRED_TABLES}
    channels = before["tables"]["channel"]
    names = {c["id"]: c["name"] for c in channels}
    ids = dict(conn.execute("SELECT name, pg_catalog.hashtextextended(name, 0) FROM unnest(%s::text[]) AS name",
                            (sorted(names.values()),)).fetchall())

    def setting(c: dict, col: str):
        return c.get(col, CHANNEL_DEFAULTS[col])

    def limited(c: dict) -> bool:
        return setting(c, "max_concurrency") is not None or setting(c, "release_interval_ms") > 0 \
            or setting(c, "is_paused")

    by_name = {c["name"]: c for c in channels}
    messages = tables["message"]
    num_admitted: dict[str, int] = {}
    release_at = {c["name"]: (None if c["last_served_at"] is None
                              else c["last_served_at"] + c["release_interval_ms"]) for c in channels}
    for m in messages:
        m["_channel"] = names[m["channel_id"]]
        m["channel_id"] = ids[m["_channel"]]
        m["_admitted"] = m["is_locked"] and limited(by_name[m["_channel"]])
    for name, c in by_name.items():
        if not limited(c):
            continue
        mine = [m for m in messages if m["_channel"] == name]
        locks = sum(m["is_locked"] for m in mine)
        ready = sorted((m for m in mine if not m["is_locked"] and m["dequeue_at"] <= now),
                       key=lambda m: (m["dequeue_at"], m["id"]))
        room = 0 if setting(c, "is_paused") else min(
            len(ready) if c["max_concurrency"] is None else max(c["max_concurrency"] - locks, 0),
            1 if c["release_interval_ms"] > 0 else len(ready))
        for m in ready[:room]:
            m["_admitted"] = True
            if release_at[name] is not None and release_at[name] > now:
                m["dequeue_at"] = release_at[name]
        num_admitted[name] = locks + min(room, len(ready))
    for m in messages:
        if "is_counted" in m:
            del m["is_counted"]
            m["is_admitted"] = m["_admitted"]
        del m["_channel"], m["_admitted"]

    kept = []
    for c in channels:
        if all(setting(c, col) == value for col, value in CHANNEL_DEFAULTS.items()):
            continue
        row = {k: v for k, v in c.items() if RETIRED_COLUMNS.get(("channel", k), (None, k))[1] == k}
        row["id"] = ids[c["name"]]
        row["release_at"] = release_at[c["name"]]
        row["num_admitted"] = num_admitted.get(c["name"], 0)
        if row.get("notify_payload"):
            row["notify_payload"] = str(ids[c["name"]])
        kept.append(row)
    tables["channel"] = kept
    for t in ("channel_quota", "message_key"):
        for r in tables.get(t, []):
            r["channel_id"] = ids[names[r["channel_id"]]]
    sequences = {s: v for s, v in before["sequences"].items() if s not in RETIRED_SEQUENCES}
    return {"tables": tables, "sequences": sequences}


def differences(want: dict, got: dict) -> list[str]:
    """What differs between two states of project()'s shape, each table's
    rows compared as sets (the upgrade changes primary keys, and so the
    order project() reads them in)."""
    def key(row: dict) -> str:
        return repr(sorted(row.items()))

    problems = []
    for t in sorted(set(want["tables"]) | set(got["tables"])):
        w = sorted(want["tables"].get(t, []), key=key)
        g = sorted(got["tables"].get(t, []), key=key)
        if w != g:
            lines = [f"lonnymq.{t}: {len(w)} rows expected, {len(g)} found"]
            gone = [r for r in w if r not in g]
            extra = [r for r in g if r not in w]
            lines += [f"  expected {r}" for r in gone[:5]] + [f"  found    {r}" for r in extra[:5]]
            problems.append("\n".join(lines))
    for s in sorted(set(want["sequences"]) | set(got["sequences"])):
        if want["sequences"].get(s) != got["sequences"].get(s):
            problems.append(f"lonnymq.{s}: {want['sequences'].get(s)} expected, {got['sequences'].get(s)} found")
    return problems


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


def round_violation(deliveries: list[tuple[int, str]], ready: dict[int, str]) -> str | None:
    """The first breach of the round property in a drain, or None.
    deliveries: (message id, channel) in delivery order; ready: the messages
    ready when the drain began, id -> channel.  Each round gives every
    channel that is ready one delivery, so at every point of the drain no
    channel has two deliveries more than a channel that still holds one of
    those messages.  (A channel whose message becomes ready later joins a
    round, at most one round late: it is held to the same bound, not waited
    for.)"""
    counts: dict[str, int] = {}
    waiting: dict[str, int] = {}
    for channel in ready.values():
        waiting[channel] = waiting.get(channel, 0) + 1
    for i, (mid, channel) in enumerate(deliveries):
        counts[channel] = counts.get(channel, 0) + 1
        if mid in ready:
            waiting[channel] -= 1
        behind = {c: counts.get(c, 0) for c, n in waiting.items() if n > 0 and counts[channel] - counts.get(c, 0) > 1}
        if behind:
            return (f"delivery {i} is {channel}'s number {counts[channel]}, while these channels, with a "
                    f"message ready since the start still to deliver, had only: {behind}")
    return None


def connect(cluster, dbname: str, **kwargs) -> psycopg.Connection:
    return psycopg.connect(cluster.dsn(dbname), autocommit=True, **kwargs)
