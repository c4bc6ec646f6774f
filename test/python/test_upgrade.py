"""Upgrade from the released 0.1.0 to the current version (the control file's
default_version) with ALTER EXTENSION lonnymq UPDATE.

The module builds, on the session cluster:

  upgraded   CREATE EXTENSION lonnymq VERSION '0.1.0', a queue in every state
             loaded with the 0.1.0 API (upgrade/scenario.py), then ALTER
             EXTENSION lonnymq UPDATE.  Tests work on clones of it, so each
             starts from the state right after the upgrade.
  reference  a clone of the loaded database taken before the update: what
             0.1.0 would have done with the same queue.
  fresh      CREATE EXTENSION lonnymq (default version), with the same
             grant_access / revoke_access calls as the upgraded one.

and checks that the rows survive (by column name, but for what an upgrade
retires or renames, listed with what becomes of each value in
upgrade/scenario.py, RETIRED_*: 0.11.0's new data model; new columns of old
rows hold what a fresh install gives them), that the old fencing tokens,
locks, limits, pending wake-ups and delivery order behave as before (0.11.0
keeps the order within each channel and serves channels in rounds), that the
roles granted before the
upgrade got the new functions of their sets and PUBLIC nothing, that a dump and
restore of the upgraded database keeps rows and grants, that every pgTAP file
passes against (a drained clone of) the upgraded database, and that the
upgraded schema is the fresh install's (pg_dump --schema-only of the schema,
config-dump registrations, member objects, initial privileges, privileges).
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

import test_pgtap as pgtap_suite  # a module, not its test function: not collected again
from conftest import DEFAULT_VERSION, Database
from upgrade import schema, scenario
from upgrade.scenario import HOUR

FROM_VERSION = "0.1.0"  # the released version every upgrade test starts from


@dataclass
class Upgrade:
    cluster: object
    upgraded: str
    reference: str
    fresh: str
    loaded: scenario.Loaded
    before: dict
    after: dict
    expected: dict
    new: dict
    extversion: str
    update_path: str | None


def _uid() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def upgrade(cluster):
    uid = _uid()
    upgraded, reference, fresh = f"upg_{uid}_upgraded", f"upg_{uid}_reference", f"upg_{uid}_fresh"
    made: list[str] = []
    try:
        with scenario.connect(cluster, "postgres") as conn:
            (n,) = conn.execute(
                "SELECT count(*) FROM pg_available_extension_versions "
                "WHERE name = 'lonnymq' AND version = %s", (FROM_VERSION,)).fetchone()
        if n != 1:
            pytest.fail(f"lonnymq {FROM_VERSION} is not installed (sql/lonnymq--{FROM_VERSION}.sql; "
                        "make install)", pytrace=False)

        cluster.create_database(upgraded, extensions=("pgtap",))
        made.append(upgraded)
        with scenario.connect(cluster, upgraded) as conn:
            conn.execute(f"CREATE EXTENSION lonnymq VERSION '{FROM_VERSION}'")
            loaded = scenario.load(conn)
            scenario.check_every_state(conn, loaded)
            before = scenario.snapshot(conn)
        cluster.create_database(reference, template=upgraded)
        made.append(reference)

        with scenario.connect(cluster, upgraded) as conn:
            conn.execute("ALTER EXTENSION lonnymq UPDATE")
            (extversion,) = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'lonnymq'").fetchone()
            (path,) = conn.execute(
                "SELECT path FROM pg_extension_update_paths('lonnymq') "
                "WHERE source = %s AND target = %s", (FROM_VERSION, extversion)).fetchone() or (None,)
            after, new = scenario.project(conn, before)
            expected = scenario.carry(conn, before, scenario.clock(conn))
        if extversion != DEFAULT_VERSION:
            pytest.fail(f"ALTER EXTENSION lonnymq UPDATE left version {extversion}, but lonnymq.control "
                        f"says {DEFAULT_VERSION}: is the current build installed (make install)?",
                        pytrace=False)

        cluster.create_database(fresh, extensions=())
        made.append(fresh)
        with scenario.connect(cluster, fresh) as conn:
            conn.execute("CREATE EXTENSION lonnymq")
            scenario.apply_role_ops(conn)

        yield Upgrade(cluster, upgraded, reference, fresh, loaded, before, after, expected, new, extversion, path)
    finally:
        for name in made:
            cluster.drop_database(name)
        with scenario.connect(cluster, "postgres") as conn:
            scenario.drop_roles(conn)


@pytest.fixture
def clone(upgrade, request):
    """Factory: a fresh clone of one of the module's databases (default: upgraded),
    dropped after the test."""
    made: list[Database] = []

    def make(template: str | None = None) -> Database:
        name = f"upg_{_uid()}_{re.sub(r'[^a-z0-9]+', '_', request.node.name.lower())}"[:63]
        upgrade.cluster.create_database(name, template=template or upgrade.upgraded)
        db = Database(upgrade.cluster, name)
        made.append(db)
        return db

    yield make
    for db in made:
        db.close()
        upgrade.cluster.drop_database(db.name)


def one(conn, query: str, params=()):
    row = conn.execute(query, params).fetchone()
    return None if row is None else (row[0] if len(row) == 1 else tuple(row))


# ---------------------------------------------------------------- the update itself

def test_update_reaches_the_default_version(upgrade):
    assert upgrade.extversion == DEFAULT_VERSION, (
        f"ALTER EXTENSION lonnymq UPDATE left version {upgrade.extversion}, but lonnymq.control says "
        f"{DEFAULT_VERSION}: is the current build installed (make install)?")
    if DEFAULT_VERSION != FROM_VERSION:
        assert upgrade.update_path, f"no update path from {FROM_VERSION} to {DEFAULT_VERSION}"


def test_rows_survive_by_column_name(upgrade):
    """Every row of every 0.1.0 table, every sequence position: unchanged, read
    by column name, but for what an upgrade retires or renames
    (scenario.RETIRED_*), whose values become what scenario.carry() says:
    0.11.0 drops the rotation (channel.next_at, turn, wait_at, channel_wake,
    the channel sequences), keeps the last serve as release_at and the counted
    locks as admission, gives channels the hash of their name as id (in
    messages and quotas too), drops the rows of channels without
    configuration, and admits the ready messages of channels with limits.
    New columns and tables may appear (they are listed on failure)."""
    problems = scenario.differences(upgrade.expected, upgrade.after)
    assert not problems, "\n".join(problems) + f"\n(new columns / tables: {upgrade.new})"


def test_what_0_11_0_retires_is_carried_where_it_still_means_something(upgrade):
    """The values of what 0.11.0 retires, as the new model keeps them: the
    configured channels keep their configuration and their counts, the
    others lose their row and nothing else; the counted locks are admitted;
    the last serve of a channel with a release interval holds its next
    delivery back; a pending wake-up is a ready message (a place in the round
    order), a wake-up due later a scheduled one; every lock keeps its expiry
    and token."""
    before = upgrade.before["tables"]
    old_names = {c["id"]: c["name"] for c in before["channel"]}
    with upgrade_conn(upgrade) as conn:
        now = scenario.clock(conn)
        cur = conn.execute("SELECT * FROM lonnymq.channel")
        rows = {r[1]: dict(zip([d.name for d in cur.description], r)) for r in cur}
        ids = dict(conn.execute("SELECT name, lonnymq._channel_id(name) FROM unnest(%s::text[]) AS name",
                                (list(old_names.values()),)).fetchall())
        cur = conn.execute("SELECT * FROM lonnymq.message")
        messages = {bytes(r["content"]).decode(): r for r in
                    (dict(zip([d.name for d in cur.description], row)) for row in cur)}

    # Channels: only the configured ones have a row, with their configuration.
    configured = {"conc", "conc1", "sized", "roomy", "slow", "capped"}
    assert set(rows) == configured, f"channel rows after the upgrade: {sorted(rows)}"
    for old in before["channel"]:
        if old["name"] not in configured:
            continue
        new = rows[old["name"]]
        assert new["id"] == ids[old["name"]]
        for col in ("max_concurrency", "max_size", "release_interval_ms", "num_removed", "created_at"):
            assert new[col] == old[col], (old["name"], col, old[col], new[col])
    # The counted locks are admitted, and so is what the upgrade admitted.
    want = {"conc": (2, 0), "conc1": (1, 0), "slow": (2, 1), "capped": (1, 1), "sized": (0, 0), "roomy": (0, 0)}
    got = {n: (r["num_admitted"], r["num_pending"]) for n, r in rows.items()}
    assert got == want, f"(num_admitted, num_pending): {got}"
    for content in ("c1", "c2", "k1", "w1"):
        assert messages[content]["is_locked"] and messages[content]["is_admitted"], content
    for content in ("p1", "p2", "p5", "s1"):
        assert messages[content]["is_locked"] and not messages[content]["is_admitted"], content
    # The last serve: slow delivers nothing before it plus its interval; w2 is
    # admitted for then, w3 held; capped, never served, delivers x1 now.
    old_slow = next(c for c in before["channel"] if c["name"] == "slow")
    assert rows["slow"]["release_at"] == old_slow["last_served_at"] + HOUR > now + scenario.FAR
    assert (messages["w2"]["dequeue_at"], messages["w2"]["position"], messages["w2"]["is_held"]) == \
        (rows["slow"]["release_at"], None, False)
    assert messages["w3"]["is_held"] and messages["w3"]["position"] is None
    assert rows["capped"]["release_at"] is None
    assert messages["x1"]["position"] is not None and messages["x1"]["is_admitted"]
    assert all(messages[x]["is_held"] for x in ("x2", "x3", "x4"))
    # conc and conc1 (max_concurrency, no release interval) claim at the take
    # from 0.15.0: the messages they held are placed, unclaimed.
    assert all(messages[c]["position"] is not None and not messages[c]["is_held"] and not messages[c]["is_admitted"]
               and messages[c]["is_limited"] for c in ("c3", "c4", "k2"))
    # Pending wake-ups: their messages are ready, in their channel's slot; one
    # due in an hour: scheduled.
    mask = (1 << scenario.SLOT_BITS) - 1
    for content, channel in (("g1", "woken"), ("n1", "newborn"), ("n2", "newborn")):
        m = messages[content]
        assert m["position"] is not None and m["position"] & mask == ids[channel] & mask, (content, m)
    assert messages["n1"]["position"] < messages["n2"]["position"], "one place per round, in order"
    h1 = messages["h1"]
    assert (h1["position"], h1["is_held"], h1["is_locked"]) == (None, False, False) and h1["dequeue_at"] > now
    # Every message keeps its channel (by name), id, lock and token.
    for old in before["message"]:
        m = messages[bytes(old["content"]).decode()]
        assert (m["id"], m["channel"], m["channel_id"], m["is_locked"], m["num_attempts"]) == \
            (old["id"], old_names[old["channel_id"]], ids[old_names[old["channel_id"]]], old["is_locked"],
             old["num_attempts"])
        if old["is_locked"]:
            assert m["dequeue_at"] == old["dequeue_at"] and m["position"] is None


# An older version's admission in flight, in the form a 0.15.0 take leaves
# it (test_new_columns_of_old_rows_match_a_fresh_install): the message
# admitted while its channel's release interval runs is held, out of the
# channel's counts, and the channel has a wake due at release_at.  One row
# per channel changed.
RELEASE_IN_FLIGHT = """
WITH back AS (
    UPDATE lonnymq.message AS m SET is_admitted = FALSE, is_held = TRUE
    FROM lonnymq.channel AS c
    WHERE c.id = m.channel_id AND c.name = m.channel AND c.release_interval_ms > 0
        AND m.is_admitted AND NOT m.is_locked AND m.position IS NULL
    RETURNING m.channel_id
)
UPDATE lonnymq.channel AS c
SET num_admitted = c.num_admitted - b.n, num_pending = c.num_pending - b.n,
    wake_id = lonnymq._channel_wake(c.id, c.name, c.wake_id, c.release_at)
FROM (SELECT channel_id, count(*)::integer AS n FROM back GROUP BY channel_id) AS b
WHERE c.id = b.channel_id
"""


def test_new_columns_of_old_rows_match_a_fresh_install(upgrade, clone):
    """Columns the upgrade added to lonnymq.channel and lonnymq.message hold, for
    the rows that existed, what a fresh install gives the same rows: the same
    0.1.0 calls replayed on a clone of the fresh database.  Columns holding
    times (*_at) are left out: the replay runs later.  So is message.locked_by
    (0.9.0), the role holding a lock, which no update can know: it is NULL
    on every old row, and such a lock may be settled by any role, as before
    (test/pgtap/210_lock_holder.sql).

    message.position (0.11.0) is a place in the round order, which depends on
    history (the rounds served so far, the marks): what is compared is what
    it means, whether the message is ready (placed) or not, its channel's
    slot (the low bits of the channel's id), and the order of each channel's
    ready messages in the order their channel's turns deliver them ((dequeue_at,
    id): a turn delivers its channel's first ready message).  message.is_early
    (0.11.0) says that a message was placed behind messages it sorts before,
    which depends on the order the replay created them in; the upgrade places
    every channel's ready messages in order, so none is early, and the
    delivery order compared here is what it is for.  An expired lock counts
    as such, placed or not: the replay's later dequeues promoted it, the
    upgrade leaves it to the first dequeue, and either way it is recovered
    there.

    channel: the replay's channel_set('idle_set') keeps a row with the
    default configuration; 0.10.1 could not tell it from a channel its first
    message created, and the upgrade drops both (RETIRED_*): the rows
    compared are the upgraded ones.

    Admission (0.11.0): a new message of a channel with limits waits, due at
    once, until a dequeue or tick() admits it, so the replay's last creates
    in such a channel are still waiting; the upgrade admits what a channel
    has room for at once.  Both sides are compared after one tick(), which
    admits what waits (and recovers what has expired, on both sides).

    channel.admit_from (0.13.1) is a bound below every message of the
    channel waiting for its admission, which admissions raise: it depends
    on the admissions that ran since, and every value at or below the first
    waiting message means the same (the marks' test checks it).

    A take in a channel with a release interval admits nothing (0.15.0): it
    leaves a wake due at the interval's end, which admits the channel's next
    message then.  The upgrade keeps an older version's admission in flight
    (that message admitted, due at the interval's end): it delivers the same
    message at the same time, and its dequeue_at, which that admission
    raised, is not rewritten.  The upgraded side is compared in the form a
    0.15.0 take leaves (RELEASE_IN_FLIGHT: the message held, out of the
    channel's counts, and a wake at release_at), which must apply to exactly
    the channels where the replay left a wake; channel.wake_id, an id, is
    compared as whether it names a pending wake."""
    with upgrade_conn(upgrade) as u_conn:
        if "locked_by" in upgrade.new.get("message", []):
            assert u_conn.execute("SELECT count(*) FROM lonnymq.message WHERE locked_by IS NOT NULL").fetchone()[0] == 0
    new_cols = {t: [c for c in upgrade.new.get(t, [])
                    if not c.endswith("_at") and c not in ("locked_by", "is_early", "admit_from")]
                for t in ("channel", "message")}
    new_cols = {t: cols for t, cols in new_cols.items() if cols}
    if not new_cols:
        return
    fresh = clone(upgrade.fresh)
    with fresh.connect() as conn:
        scenario.load(conn, roles=False)
    mask = (1 << scenario.SLOT_BITS) - 1
    placed = ("CASE WHEN is_locked AND dequeue_at <= lonnymq.to_epoch(clock_timestamp()) THEN 'expired lock' "
              "WHEN position IS NULL THEN 'not placed' "
              f"WHEN position & {mask} = channel_id & {mask} THEN 'placed' ELSE 'placed off its slot' END")
    problems = []
    upgraded = clone()  # tick() changes it: a clone, not the module's database
    with fresh.connect() as f_conn, upgraded.connect() as u_conn:
        for conn in (f_conn, u_conn):
            conn.execute("SELECT lonnymq.tick()")
        if "wake_id" in new_cols.get("channel", []):
            wakes = f_conn.execute("SELECT count(*) FROM lonnymq.channel WHERE wake_id IS NOT NULL").fetchone()[0]
            assert u_conn.execute(RELEASE_IN_FLIGHT).rowcount == wakes
        pending_wake = "EXISTS (SELECT FROM lonnymq.message AS w WHERE w.id = wake_id AND w.schedule = '')"
        for t, cols in new_cols.items():
            key = "name" if t == "channel" else "convert_from(content, 'UTF8')"
            query = f"SELECT {key}, " + ", ".join(
                placed if c == "position" else pending_wake if c == "wake_id" else f'"{c}"' for c in cols) + \
                f" FROM lonnymq.{t}"
            want = {r[0]: r[1:] for r in f_conn.execute(query)}
            got = {r[0]: r[1:] for r in u_conn.execute(query)}
            problems += [f"lonnymq.{t} {k!r} {cols}: upgraded {got[k]}, fresh {want.get(k)}"
                         for k in sorted(got) if got[k] != want.get(k)]
            if t == "channel":
                assert set(want) - set(got) == {"idle_set"} and set(got) <= set(want), (sorted(want), sorted(got))
        if "position" in new_cols.get("message", []):
            order = ("SELECT channel, array_agg(convert_from(content, 'UTF8') ORDER BY dequeue_at, id) "
                     "FROM lonnymq.message WHERE position IS NOT NULL AND NOT is_locked GROUP BY channel")
            want, got = dict(f_conn.execute(order).fetchall()), dict(u_conn.execute(order).fetchall())
            if got != want:
                problems.append(f"ready messages of each channel, in their order: upgraded {got}, fresh {want}")
    assert not problems, "\n".join(problems[:30])


# ---------------------------------------------------------------- behaviour on the old data

def test_old_tokens_still_complete_defer_and_heartbeat(upgrade, clone):
    tok = upgrade.loaded.tokens
    db = clone()
    with db.connect() as conn:
        def call(fn, *args):
            return one(conn, f"SELECT lonnymq.{fn}({', '.join(['%s'] * len(args))})", args)

        p1, p2 = tok["p1"], tok["p2"]
        assert call("message_heartbeat", p2[0], p2[1] + 1, HOUR) is False, "a wrong token must be refused"
        assert call("message_complete", p1[0], p1[1] + 1) is False
        assert call("message_complete", *p1) is True, "a 0.1.0 lock completes"
        assert call("message_complete", *p1) is False, "and only once"
        assert call("message_heartbeat", *p2, 2 * HOUR) is True, "a 0.1.0 lock takes a heartbeat"
        assert one(conn, "SELECT dequeue_at > lonnymq.to_epoch(clock_timestamp()) + %s FROM lonnymq.message "
                         "WHERE id = %s", (HOUR + scenario.FAR, p2[0])) is True
        assert call("message_defer", *p2, None, b"deferred-after-upgrade") is True, "a 0.1.0 lock defers"
        assert one(conn, "SELECT is_locked, state FROM lonnymq.message WHERE id = %s", (p2[0],)) == \
            (False, b"deferred-after-upgrade")
        assert call("message_complete", *tok["p4"]) is False, "a token of a message deferred before stays stale"
        # the expired lock's worker still holds a current token until someone recovers it
        assert call("message_complete", *tok["p5"]) is True, "an expired, unrecovered lock still completes"
        # constrained channels: the counters carried over
        assert conn.execute("SELECT * FROM lonnymq.message_dequeue(%s, 10, 'conc')", (HOUR,)).fetchall() == [], \
            "conc was at its max_concurrency"
        assert call("message_complete", *tok["c1"]) is True
        got = conn.execute("SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(%s, 10, 'conc')",
                           (HOUR,)).fetchall()
        assert got == [("c3",)], f"one slot freed in conc: got {got}"
        assert call("message_heartbeat", *tok["c2"], HOUR) is True
        assert call("message_defer", *tok["w1"], None, None) is True
        assert call("message_complete", *tok["s1"]) is True


def test_expired_locks_are_recovered_with_one_more_attempt(upgrade, clone):
    tok = upgrade.loaded.tokens
    db = clone()
    with db.connect() as conn:
        # conc1 is at its max_concurrency 1 with only an expired lock: recovery only.
        rows = conn.execute("SELECT id, convert_from(content, 'UTF8'), num_attempts, is_recovered "
                            "FROM lonnymq.message_dequeue(%s, 10, 'conc1')", (HOUR,)).fetchall()
        k1 = tok["k1"]
        assert rows == [(k1[0], "k1", k1[1] + 1, True)], rows
        assert one(conn, "SELECT lonnymq.message_complete(%s, %s)", k1) is False, "the old token is stale now"
        assert one(conn, "SELECT lonnymq.message_complete(%s, %s)", (k1[0], k1[1] + 1)) is True
        rows = conn.execute("SELECT convert_from(content, 'UTF8'), is_recovered "
                            "FROM lonnymq.message_dequeue(%s, 10, 'conc1')", (HOUR,)).fetchall()
        assert rows == [("k2", False)], rows
        # plain's expired lock comes back in the position of its expiry, counted.
        rows = conn.execute("SELECT id, convert_from(content, 'UTF8'), num_attempts, is_recovered, state "
                            "FROM lonnymq.message_dequeue(%s, 1000, 'plain')", (HOUR,)).fetchall()
        p5 = tok["p5"]
        rec = [r for r in rows if r[3]]
        assert rec == [(p5[0], "p5", p5[1] + 1, True, None)], rows
        contents = [r[1] for r in rows]
        assert contents == ["p-urgent", "p-zero", "p5", "p4", "p6", "p7", "p8", "p9"], contents
        assert rows[3][4] == b"state-now", "the state saved by a 0.1.0 defer is delivered"


def test_delivery_order_is_the_one_0_1_0_would_have_given(upgrade, clone):
    """Drain the queue (one at a time, then in batches of 7, completing each
    delivery) on clones of the upgraded database and of the 0.1.0 database
    taken before the update: the same messages, with the same attempts,
    recovery flags, states and dequeue_at, and within each channel in the
    same order.

    Across channels the order is no longer 0.1.0's, by design (0.11.0,
    doc/dequeue-design.md, "Where the round order is looser than a
    rotation"): 0.1.0 served its rotation of channel rows, which 0.11.0
    retires; a ready message now has a position in the round order, at its
    channel's slot (a fixed place in every round, from the hash of its
    name), so a round serves its channels in slot order, and the upgrade
    gives each ready message of a channel without limits the channel's
    position in successive rounds.  What both orders
    promise, and what is checked across channels instead, is the round
    property: no channel gets a second delivery before every other ready
    channel got one (a batch of N counts as N deliveries).  Precisely: at
    every point of the drain, no channel has two deliveries more than a
    channel that still holds a message the upgrade made ready.  Channels
    whose messages become ready during the drain (an expired lock that the
    first dequeue recovers, a held message admitted when its channel's
    concurrency frees, a placed one whose take claims, 0.15.0) join a round
    and are held to the same bound as the others, but are not waited for: a
    joiner may wait up to one round."""
    for limit in (1, 7):
        up, ref = clone(), clone(upgrade.reference)
        with up.connect() as u, ref.connect() as r:
            # (Not the placed messages whose take must claim, 0.15.0: their
            # channel may be full, and they join a round as held ones do.)
            placed = {row[0]: row[1] for row in u.execute(
                "SELECT id, channel FROM lonnymq.message WHERE position IS NOT NULL AND NOT is_locked"
                " AND NOT (is_limited AND NOT is_admitted)")}
            want = scenario.drain_order(r, limit)
            got = scenario.drain_order(u, limit)
        flat_want = [m for batch in want for m in batch]
        flat_got = [m for batch in got for m in batch]
        assert (len(flat_want), sum(m[6] for m in flat_want)) == (18, 2), \
            f"0.1.0 should deliver 18 messages, 2 of them recovered: {flat_want}"
        assert all(1 <= len(batch) <= limit for batch in got), [len(batch) for batch in got]

        def by_channel(flat):
            out: dict[str, list] = {}
            for m in flat:
                out.setdefault(m[1], []).append(m)
            return out

        w, g = by_channel(flat_want), by_channel(flat_got)
        assert g == w, (
            f"p_limit {limit}: within a channel the upgraded queue delivers differently from 0.1.0\n"
            + "\n".join(f"{'   ' if g.get(c) == w.get(c) else '!! '}{c}\n      0.1.0 {w.get(c)}\n      now   {g.get(c)}"
                        for c in sorted(set(w) | set(g))))
        assert set(placed.values()) >= {"plain", "roomy", "sized", "woken", "newborn", "capped"}, placed

        problem = scenario.round_violation([(m[0], m[1]) for m in flat_got], placed)
        assert problem is None, f"p_limit {limit}: {problem}\n" + " ".join(f"{m[1]}:{m[2]}" for m in flat_got)


def test_max_size_channel_still_refuses(upgrade, clone):
    db = clone()
    with db.connect() as conn:
        held = "SELECT count(*) FROM lonnymq.message AS m JOIN lonnymq.channel AS c ON c.id = m.channel_id " \
               "WHERE c.name = 'sized'"
        assert one(conn, held) == 3
        assert one(conn, "SELECT lonnymq.message_create('sized', 'over')") is None, "sized is full"
        assert one(conn, held) == 3, "and nothing was stored"
        assert one(conn, "SELECT lonnymq.message_complete(%s, %s)", upgrade.loaded.tokens["s1"]) is True
        assert one(conn, "SELECT lonnymq.message_create('sized', 'fits')") is not None, "one place freed"
        assert one(conn, "SELECT lonnymq.message_create('sized', 'over')") is None
        assert one(conn, "SELECT lonnymq.message_create('roomy', 'fits')") is not None


def test_waiting_and_empty_channels_are_woken_by_new_messages(upgrade, clone):
    """0.1.0 kept a channel that a consumer found with nothing deliverable out
    of its rotation (wait_at), and a producer left a wake-up (channel_wake)
    for it.  0.11.0 retires both: a ready message has its place in the round
    order from its create (or from the upgrade), whatever its channel did
    before, and a channel without configuration needs no row.  So: the
    messages of the pending wake-ups are delivered, and a new message of a
    waiting, an emptied or an unused channel is delivered at once, by a
    dequeue of its channel and by a dequeue of any channel."""
    db = clone()
    with db.connect() as conn:
        def take(channel=None, limit=10):
            return [r[0] for r in conn.execute(
                "SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(%s, %s, %s)",
                (HOUR, limit, channel))]

        def has_row(channel):
            return one(conn, "SELECT count(*) FROM lonnymq.channel WHERE name = %s", (channel,)) == 1

        # Pending wake-ups left by 0.1.0 producers are applied.
        assert take("woken") == ["g1"]
        assert take("newborn") == ["n1", "n2"]
        assert take("woken_future") == [], "h1 is an hour away"
        assert take("capped") == ["x1"], "capped: one delivery, then its release interval"
        # A channel waiting for a future message, an emptied one, one that
        # never had messages: none has a row, none needs one.
        assert take("future") == [] and take("emptied") == [] and take("idle_set") == []
        for channel in ("future", "emptied", "idle_set", "woken", "newborn", "woken_future"):
            assert not has_row(channel), f"{channel} has no configuration, and no row"
        conn.execute("SELECT lonnymq.message_create('future', 'f-now')")
        assert take("future") == ["f-now"], "a new, ready message of a waiting channel"
        conn.execute("SELECT lonnymq.message_create('emptied', 'e-now')")
        assert take("emptied") == ["e-now"]
        conn.execute("SELECT lonnymq.message_create('idle_set', 'i-now')")
        assert take("idle_set") == ["i-now"]
        # Nothing delivered early, no release interval skipped.
        assert take("slow") == []
        # The same without naming the channel: once everything ready is
        # delivered, a new message of a waiting channel is the next delivery.
        scenario.drain_order(conn, 10)
        for channel, content in (("future", "f-again"), ("emptied", "e-again"), ("idle_set", "i-again")):
            conn.execute("SELECT lonnymq.message_create(%s, %s)", (channel, content))
            assert take() == [content], f"{channel}: a new message is delivered at once"
            assert not has_row(channel)
        assert take() == [], "nothing early: f1, h1, p3, p-future an hour away, slow and capped in their interval"


# ---------------------------------------------------------------- privileges

# The access sets of the current API contract that the 0.1.0 sets did not have.
NEW_IN_SET = {
    "producer": ("message_create_batch",),
    "consumer": ("message_complete_batch", "message_fail"),
    "admin": ("message_create_batch", "message_complete_batch", "message_fail", "message_cancel",
              "dead_letter_redrive", "dead_letter_delete", "schedule_set", "schedule_drop", "tick", "history_prune",
              "channel_pause", "channel_resume"),
}
NEW_ADMIN_RELATIONS = ("dead_letter", "message_history", "channel_stats")


def upgrade_conn(upgrade) -> psycopg.Connection:
    return scenario.connect(upgrade.cluster, upgrade.upgraded)


def test_privileges_equal_a_fresh_install_with_the_same_grants(upgrade):
    """Who may do what on every lonnymq object (schema, functions, tables, views,
    sequences, columns, types), PUBLIC and the owner included: the upgraded
    database equals a fresh install given the same grant_access calls."""
    cluster = upgrade.cluster
    got = set(schema.privileges(cluster.dsn(upgrade.upgraded)))
    want = set(schema.privileges(cluster.dsn(upgrade.fresh)))
    missing = sorted(want - got)
    extra = sorted(got - want)
    assert not missing and not extra, (
        "privileges differ from a fresh install with the same grants\n"
        + "".join(f"  missing after the upgrade: {p}\n" for p in missing)
        + "".join(f"  only after the upgrade:    {p}\n" for p in extra))


def test_roles_granted_before_the_upgrade_have_the_new_functions_of_their_sets(upgrade):
    with upgrade_conn(upgrade) as conn:
        def can(role, fname):
            rows = conn.execute(
                "SELECT p.oid::regprocedure::text, has_function_privilege(%s, p.oid, 'EXECUTE') "
                "FROM pg_proc AS p WHERE p.pronamespace = 'lonnymq'::regnamespace AND p.proname = %s",
                (role, fname)).fetchall()
            assert rows, f"lonnymq.{fname} does not exist"
            return all(ok for _, ok in rows)

        problems = []
        for role, sets in (("lmq_upg_app", ["producer"]), ("lmq_upg_worker", ["consumer"]),
                           ("lmq_upg_ops", ["admin"]), ("lmq_upg_both", ["producer", "consumer"]),
                           ("lmq_upg_was", ["producer"])):
            allowed = {f for s in sets for f in NEW_IN_SET[s]}
            for fname in sorted({f for fs in NEW_IN_SET.values() for f in fs}):
                if can(role, fname) != (fname in allowed):
                    problems.append(f"{role} ({'+'.join(sets)}): EXECUTE on {fname} should be "
                                    f"{fname in allowed}")
        for rel in NEW_ADMIN_RELATIONS:
            for role in ("lmq_upg_ops", "lmq_upg_app", "lmq_upg_worker"):
                ok = one(conn, "SELECT has_table_privilege(%s, %s, 'SELECT')", (role, f"lonnymq.{rel}"))
                if ok != (role == "lmq_upg_ops"):
                    problems.append(f"{role}: SELECT on lonnymq.{rel} should be {role == 'lmq_upg_ops'}")
        assert not problems, "\n".join(problems)


def test_roles_granted_before_the_upgrade_can_call_the_new_functions(upgrade, clone):
    tok = upgrade.loaded.tokens
    db = clone()
    with db.connect() as conn:
        conn.execute("SET ROLE lmq_upg_app")
        ids = [r[0] for r in conn.execute(
            "SELECT * FROM lonnymq.message_create_batch('plain', ARRAY['b1', 'b2']::bytea[])")]
        assert len(ids) == 2 and all(ids), ids
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM lonnymq.message_dequeue(1000)")
        conn.execute("RESET ROLE")

        conn.execute("SET ROLE lmq_upg_worker")
        assert one(conn, "SELECT lonnymq.message_fail(%s, %s, 'boom')", tok["p2"]) in ("retry", "dead")
        assert one(conn, "SELECT lonnymq.message_complete_batch(%s, %s)",
                   ([tok["p1"][0]], [tok["p1"][1]])) == 1
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("SELECT lonnymq.message_create('plain', 'x')")
        conn.execute("RESET ROLE")

        conn.execute("SET ROLE lmq_upg_ops")
        for rel in NEW_ADMIN_RELATIONS:
            conn.execute(f"SELECT count(*) FROM lonnymq.{rel}")
        conn.execute("RESET ROLE")


def test_nothing_is_granted_to_public(upgrade):
    with upgrade_conn(upgrade) as conn:
        bad = [r[0] for r in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc AS p "
            "WHERE p.pronamespace = 'lonnymq'::regnamespace "
            "AND has_function_privilege('public', p.oid, 'EXECUTE')")]
        bad += [r[0] for r in conn.execute(
            "SELECT c.oid::regclass::text || ' ' || priv FROM pg_class AS c, "
            "unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS priv "
            "WHERE c.relnamespace = 'lonnymq'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f') "
            "AND has_table_privilege('public', c.oid, priv)")]
        bad += [r[0] for r in conn.execute(
            "SELECT c.oid::regclass::text FROM pg_class AS c WHERE c.relnamespace = 'lonnymq'::regnamespace "
            "AND CASE WHEN c.relkind = 'S' THEN has_sequence_privilege('public', c.oid, 'USAGE, SELECT, UPDATE') "
            "ELSE FALSE END")]
        if one(conn, "SELECT has_schema_privilege('public', 'lonnymq', 'USAGE, CREATE')"):
            bad.append("schema lonnymq")
    assert not bad, "granted to PUBLIC after the upgrade: " + ", ".join(bad)


def test_dump_and_restore_of_the_upgraded_database_keep_rows_and_grants(upgrade):
    """pg_dump of the upgraded database restored into a new one (CREATE EXTENSION
    of the current version, then the config tables' rows): every row, sequence
    and privilege comes back, the grants of grant_access included."""
    cluster = upgrade.cluster
    dump = cluster.base_dir / f"{upgrade.upgraded}.dump"
    restored = f"upg_{_uid()}_restored"
    subprocess.run([str(cluster.bindir / "pg_dump"), "-Fc", "-f", str(dump), *cluster.client_args(upgrade.upgraded)],
                   check=True, env=cluster.client_env(), capture_output=True)
    cluster.psql(f'CREATE DATABASE "{restored}"')
    try:
        proc = subprocess.run([str(cluster.bindir / "pg_restore"), "--exit-on-error",
                               *cluster.client_args(restored), str(dump)],
                              env=cluster.client_env(), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        with scenario.connect(cluster, upgrade.upgraded) as conn:
            want = scenario.snapshot(conn)
        with scenario.connect(cluster, restored) as conn:
            got = scenario.snapshot(conn)
        assert got == want, "the restored queue differs from the upgraded one"
        want_privs = set(schema.privileges(cluster.dsn(upgrade.upgraded)))
        got_privs = set(schema.privileges(cluster.dsn(restored)))
        assert got_privs == want_privs, (
            "privileges lost or gained by a dump and restore of the upgraded database\n"
            + "".join(f"  lost:   {p}\n" for p in sorted(want_privs - got_privs))
            + "".join(f"  gained: {p}\n" for p in sorted(got_privs - want_privs)))
    finally:
        cluster.drop_database(restored)
        dump.unlink(missing_ok=True)


# ---------------------------------------------------------------- schema

def test_schema_is_the_fresh_install_schema(upgrade):
    """pg_dump --schema-only --schema=lonnymq of the upgraded and of the fresh
    database (members detached from the extension in throwaway clones):
    identical, first with the columns of each table sorted (so that a
    difference reads as one), then in their order."""
    if DEFAULT_VERSION != FROM_VERSION:
        pg_config = os.environ.get("PG_CONFIG") or "pg_config"  # as pgcluster.pg_bindir
        sharedir = subprocess.run([pg_config, "--sharedir"], capture_output=True, text=True,
                                  check=True).stdout.strip()
        script = Path(sharedir) / "extension" / f"lonnymq--{DEFAULT_VERSION}.sql"
        assert script.exists(), (
            f"{script} is not installed: the fresh install would itself go through the update "
            "scripts and the comparison would prove nothing")
    cluster = upgrade.cluster
    up_dump, fresh_dump = schema.dump_schema(cluster, upgrade.upgraded), schema.dump_schema(cluster, upgrade.fresh)
    up = schema.normalise(up_dump)
    fresh = schema.normalise(fresh_dump)
    assert sum(1 for line in fresh if line.startswith("CREATE FUNCTION")) > 10, "the dump looks empty"
    if up != fresh:
        pytest.fail("the upgraded schema differs from a fresh install (pg_dump --schema-only, "
                    "columns sorted):\n" + schema.unified_diff(fresh, up, "fresh install", "upgraded"),
                    pytrace=False)
    # The columns in their order too: at its release the version's fingerprint
    # (upgrade/released_schemas.txt) is taken from a fresh install, and from
    # then on the version is installed through this upgrade.
    up, fresh = schema.ordered(up_dump), schema.ordered(fresh_dump)
    if up != fresh:
        pytest.fail("the columns of the upgraded schema are not in a fresh install's order (pg_dump "
                    "--schema-only):\n" + schema.unified_diff(fresh, up, "fresh install", "upgraded"),
                    pytrace=False)


def test_extension_registrations_are_the_fresh_install_ones(upgrade):
    """What pg_dump does not show once members are detached: config-dump
    registrations, member objects, initial privileges."""
    cluster = upgrade.cluster
    up = schema.extension_facts(cluster.dsn(upgrade.upgraded))
    fresh = schema.extension_facts(cluster.dsn(upgrade.fresh))
    problems = []
    for name in fresh:
        if up[name] != fresh[name]:
            a = [repr(r) for r in fresh[name]]
            b = [repr(r) for r in up[name]]
            problems.append(f"{name}:\n" + schema.unified_diff(a, b, "fresh install", "upgraded"))
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the whole suite

@pytest.fixture(scope="module")
def drained(upgrade):
    """A clone of the upgraded database with its queue emptied through the API,
    as the pgTAP files expect: every locked message completed with its current
    token, every other one cancelled, every channel dropped (without p_purge:
    each must be empty by then).  The roles and their grants stay."""
    cluster = upgrade.cluster
    name = f"upg_{_uid()}_drained"
    cluster.create_database(name, template=upgrade.upgraded)
    try:
        with scenario.connect(cluster, name) as conn:
            for mid, attempts in conn.execute(
                    "SELECT id, num_attempts FROM lonnymq.message WHERE is_locked ORDER BY id").fetchall():
                assert one(conn, "SELECT lonnymq.message_complete(%s, %s)", (mid, attempts)) is True, mid
            for (mid,) in conn.execute("SELECT id FROM lonnymq.message ORDER BY id").fetchall():
                assert one(conn, "SELECT lonnymq.message_cancel(%s)", (mid,)) is True, mid
            for (channel,) in conn.execute("SELECT name FROM lonnymq.channel ORDER BY name").fetchall():
                assert one(conn, "SELECT lonnymq.channel_drop(%s)", (channel,)) is True, channel
            left = [f"lonnymq.{t}: {n}" for t, n in (
                (t, one(conn, f'SELECT count(*) FROM lonnymq."{t}"'))
                for (t,) in conn.execute(
                    "SELECT relname FROM pg_class WHERE relnamespace = 'lonnymq'::regnamespace "
                    "AND relkind IN ('r', 'p') AND relname <> 'access_grant' ORDER BY 1").fetchall()
            ) if n]
        assert not left, "the drained queue still holds rows: " + ", ".join(left)
        yield name
    finally:
        cluster.drop_database(name)


@pytest.mark.parametrize(
    "path",
    pgtap_suite.PGTAP_FILES or [None],
    ids=[p.name for p in pgtap_suite.PGTAP_FILES] or ["no-pgtap-files"],
)
def test_pgtap_on_the_upgraded_database(path, upgrade, drained, clone):
    db = clone(drained)
    pgtap_suite.test_pgtap(path, upgrade.cluster, db)


@pytest.mark.parametrize("leftover", [
    "SELECT lonnymq.message_create('legacy*', 'x')",
    "SELECT lonnymq.channel_set('legacy*', p_max_attempts => 3)",
    "SELECT lonnymq.schedule_set('s', 'legacy*', 'x', 60000)",
])
def test_an_install_with_a_channel_named_like_a_pattern_is_refused_until_it_is_gone(cluster, leftover):
    """From 0.12.0 a name ending in '*' is a pattern: the update from 0.11.1
    refuses (55000) while such a channel has a row, messages or a schedule,
    and changes nothing; once it is gone the update goes through."""
    name = f"upg_{_uid()}_star"
    cluster.create_database(name, extensions=())
    try:
        with psycopg.connect(cluster.dsn(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION lonnymq VERSION '0.11.1'")
            conn.execute(leftover)
            with pytest.raises(errors.ObjectNotInPrerequisiteState):
                conn.execute("ALTER EXTENSION lonnymq UPDATE")
            assert one(conn, "SELECT extversion FROM pg_extension WHERE extname = 'lonnymq'") == "0.11.1"
            conn.execute("SELECT lonnymq.schedule_drop('s')" if "schedule" in leftover
                         else "SELECT lonnymq.channel_drop('legacy*', true)")
            conn.execute("ALTER EXTENSION lonnymq UPDATE")
            assert one(conn, "SELECT extversion FROM pg_extension WHERE extname = 'lonnymq'") == DEFAULT_VERSION
    finally:
        cluster.drop_database(name)


@pytest.mark.parametrize("configuration, followed", [
    ("SELECT lonnymq.channel_set('retries', p_max_attempts => 3, p_dedup_window_ms => 1000)", 0),
    ("SELECT lonnymq.channel_set('kept', p_retain_history => TRUE)", 1),
    ("SELECT lonnymq.channel_set('sized', p_max_size => 10)", 1),
    ("SELECT lonnymq.channel_set('limited', p_max_concurrency => 2)", 1),
    ("SELECT lonnymq.channel_set('spaced', p_release_interval_ms => 10)", 1),
    ("SELECT lonnymq.channel_set('ordered', p_ordered => TRUE)", 1),
    ("SELECT lonnymq.channel_pause('paused')", 1),
])
def test_the_update_from_0_14_0_sets_the_followed_flag_from_the_channels(cluster, configuration, followed):
    """0.14.0's channel_row_seq was 1 once any channel row existed, and made
    every completion read channel rows; 0.15.0's channel_followed_seq is 1
    only once a channel keeps history or has max_size or a limit, and the
    update sets it from the rows as they stand: a database whose channels
    only have retry settings stops reading channel rows in completions,
    one with something to follow keeps reading them."""
    name = f"upg_{_uid()}_followed"
    cluster.create_database(name, extensions=())
    try:
        with psycopg.connect(cluster.dsn(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION lonnymq VERSION '0.14.0'")
            conn.execute(configuration)
            assert one(conn, "SELECT pg_sequence_last_value('lonnymq.channel_row_seq')") == 1
            conn.execute("ALTER EXTENSION lonnymq UPDATE")
            assert one(conn, "SELECT pg_sequence_last_value('lonnymq.channel_followed_seq')") == followed
            # and what the flag gates still works: a completion of a
            # message of the configured channel
            channel = re.search(r"'(\w+)'", configuration).group(1)
            if channel != "paused":
                conn.execute("SELECT lonnymq.message_create(%s, 'x')", (channel,))
                mid, token = conn.execute(
                    "SELECT d.id, d.num_attempts FROM lonnymq.message_dequeue(60000, 1, %s) AS d", (channel,)).fetchone()
                assert one(conn, "SELECT lonnymq.message_complete(%s, %s)", (mid, token)) is True
                history = one(conn, "SELECT count(*) FROM lonnymq.message_history WHERE id = %s", (mid,))
                assert history == (1 if channel == "kept" else 0)
    finally:
        cluster.drop_database(name)


def test_the_update_from_0_15_0_carries_direct_grants_to_the_new_producer_signatures(cluster):
    """0.16.0's producer calls take headers: message_create, its batch and the
    two publish calls get new signatures, so the update drops the old
    functions.  A role given EXECUTE on them directly (not through
    grant_access, whose grants the update applies again) keeps it on the new
    ones, grant option included, and can call them with headers."""
    name = f"upg_{_uid()}_grants"
    role = f"lmq_direct_{_uid()}"
    cluster.create_database(name, extensions=())
    try:
        with psycopg.connect(cluster.dsn(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION lonnymq VERSION '0.15.0'")
            conn.execute(f"CREATE ROLE {role}")
            conn.execute(f"GRANT USAGE ON SCHEMA lonnymq TO {role}")
            conn.execute(f"GRANT EXECUTE ON FUNCTION lonnymq.message_create(text, bytea, bigint, text) TO {role}")
            conn.execute(
                "GRANT EXECUTE ON FUNCTION lonnymq.message_publish_batch(text, bytea[], bigint[], text[], boolean) "
                f"TO {role} WITH GRANT OPTION")
            conn.execute("ALTER EXTENSION lonnymq UPDATE")
            granted = {
                signature: one(conn, "SELECT has_function_privilege(%s, %s, 'EXECUTE')", (role, f"lonnymq.{signature}"))
                for signature in (
                    "message_create(text, bytea, bigint, text, jsonb, bigint[], text)",
                    "message_create_batch(text, bytea[], bigint[], text[], jsonb[], bigint[], text)",
                    "message_publish(text, bytea, bigint, text, boolean, jsonb, bigint[], text)",
                    "message_publish_batch(text, bytea[], bigint[], text[], boolean, jsonb[], bigint[], text)",
                )
            }
            assert granted == {
                "message_create(text, bytea, bigint, text, jsonb, bigint[], text)": True,
                "message_create_batch(text, bytea[], bigint[], text[], jsonb[], bigint[], text)": False,
                "message_publish(text, bytea, bigint, text, boolean, jsonb, bigint[], text)": False,
                "message_publish_batch(text, bytea[], bigint[], text[], boolean, jsonb[], bigint[], text)": True,
            }
            assert one(conn, "SELECT has_function_privilege(%s, %s, 'EXECUTE WITH GRANT OPTION')", (
                role, "lonnymq.message_publish_batch(text, bytea[], bigint[], text[], boolean, jsonb[], bigint[], text)"
            )) is True
            conn.execute(f"SET ROLE {role}")
            mid = one(conn, "SELECT lonnymq.message_create('g', 'x', p_headers => '{\"a\": 1}')")
            conn.execute("RESET ROLE")
            assert one(conn, "SELECT headers FROM lonnymq.message WHERE id = %s", (mid,)) == {"a": 1}
    finally:
        cluster.drop_database(name)
        with psycopg.connect(cluster.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {role}")
