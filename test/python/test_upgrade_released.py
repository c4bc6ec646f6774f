"""Every released version installs as it was released; and the upgrade from
each released version after 0.1.0 (not through 0.1.0) to the current version.

Only 0.1.0 has an install script of its own: every other released version is
installed from it through the upgrade scripts, which hold only what changed.
upgrade/released_schemas.txt fingerprints what each version's own install
script installed at its release; the installs here must match it.

test_upgrade.py starts from 0.1.0 and so runs every update script in turn;
this module starts from each of FROM with the 0.2.0 features in use (retry policy,
dead letters, dedup keys, schedules, history, a paused channel, locks), runs
ALTER EXTENSION lonnymq UPDATE, and checks that the rows survive by column
name (every table, as upgrade/scenario.py's project() reads them, but for what
an upgrade retires or renames, whose values become what carry() says: 0.11.0's
new data model), that the tokens and keys survive, that the queue works on,
and that the schema is the fresh install's.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from conftest import DEFAULT_VERSION, RELEASED
from lonnymq_dev.invariants import assert_nothing_below_the_marks
from lonnymq_dev.pgservers import SYSTEM_MAJOR
from upgrade import schema, scenario

HERE = Path(__file__).resolve().parent
# Every released version after 0.1.0, but the current one.
FROM = tuple(v for v in RELEASED if v not in ("0.1.0", DEFAULT_VERSION))


def _installed_fingerprint(cluster, version: str | None) -> str:
    db = f"rel_{uuid.uuid4().hex[:8]}"
    cluster.create_database(db, extensions=())
    try:
        with scenario.connect(cluster, db) as conn:
            conn.execute("CREATE EXTENSION lonnymq" + (f" VERSION '{version}'" if version else ""))
        return schema.fingerprint(schema.dump_schema(cluster, db), schema.extension_facts(cluster.dsn(db)))
    finally:
        cluster.drop_database(db)


def _fingerprints_comparable(cluster) -> None:
    """The fingerprints are of Debian's pg_dump 15 output, which other majors'
    pg_dump writes differently (the scripts under sql/ are the same files on
    every major: checking them once suffices)."""
    if cluster.major != SYSTEM_MAJOR:
        pytest.skip(f"fingerprints are pg_dump {SYSTEM_MAJOR}'s; this server is {cluster.major}")


@pytest.mark.parametrize("version", list(RELEASED))
def test_a_released_version_installs_as_it_was_released(cluster, version):
    _fingerprints_comparable(cluster)
    assert _installed_fingerprint(cluster, version) == RELEASED[version], (
        f"CREATE EXTENSION lonnymq VERSION '{version}' no longer installs what {version} installed at its "
        "release: a committed script under sql/ was changed")


def test_every_released_version_is_fingerprinted(cluster):
    _fingerprints_comparable(cluster)
    changelog = (HERE.parent.parent / "CHANGELOG.md").read_text()
    dated = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}\s*$", changelog, re.M)
    missing = [v for v in dated if v not in RELEASED]
    hint = ""
    if DEFAULT_VERSION in missing:
        hint = (f"\nat the release of {DEFAULT_VERSION}, add to upgrade/released_schemas.txt:\n"
                f"{DEFAULT_VERSION} {_installed_fingerprint(cluster, None)}")
    assert not missing, f"released versions without a fingerprint: {missing}{hint}"
    assert not [v for v in RELEASED if v not in dated], "fingerprints of versions the CHANGELOG does not date"

LOAD = """
SELECT lonnymq.channel_set('retry', p_max_attempts => 2, p_backoff_base_ms => 0, p_retain_history => TRUE,
                           p_dedup_window_ms => 3600000);
SELECT lonnymq.channel_set('limited', p_max_concurrency => 2, p_max_size => 10);
SELECT lonnymq.message_create('retry', convert_to('r' || g, 'UTF8'), NULL, 'key-' || g) FROM generate_series(1, 6) AS g;
SELECT lonnymq.message_create('limited', convert_to('l' || g, 'UTF8')) FROM generate_series(1, 4) AS g;
SELECT lonnymq.message_create('plain', convert_to('p' || g, 'UTF8')) FROM generate_series(1, 20) AS g;
SELECT lonnymq.schedule_set('every-hour', 'plain', 'tick', 3600000, lonnymq.to_epoch(now()) + 3600000);
SELECT lonnymq.channel_pause('paused');
SELECT lonnymq.message_create('paused', convert_to('q' || g, 'UTF8')) FROM generate_series(1, 2) AS g;
SELECT lonnymq.channel_set('doomed', p_max_attempts => 1);
SELECT lonnymq.message_create('doomed', 'd1');
"""
# From 0.9.0 (p_notify_payload): a channel whose notifications carry its id,
# which 0.11.0 changes (the hash of its name), and one that carries nothing.
LOAD_0_9_0 = """
SELECT lonnymq.channel_set('notified', p_notify => TRUE, p_notify_payload => 'id');
SELECT lonnymq.channel_set('quiet', p_notify => TRUE, p_notify_payload => 'none');
"""


@pytest.fixture(scope="module", params=FROM)
def dbs(cluster, request):
    start = request.param
    uid = uuid.uuid4().hex[:8]
    tag = start.replace(".", "")
    upgraded, fresh = f"up{tag}_{uid}_upgraded", f"up{tag}_{uid}_fresh"
    cluster.create_database(upgraded, extensions=())
    cluster.create_database(fresh, extensions=())
    try:
        with scenario.connect(cluster, upgraded) as conn:
            conn.execute(f"CREATE EXTENSION lonnymq VERSION '{start}'")
            conn.execute(LOAD)
            # In every state: completed into history, failed into dead letters, locked.
            rows = conn.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 6, 'retry')").fetchall()
            assert len(rows) == 6
            conn.execute("SELECT lonnymq.message_complete(%s, %s)", rows[0])
            for row in rows[1:3]:
                assert conn.execute("SELECT lonnymq.message_fail(%s, %s, 'boom')", row).fetchone()[0] == "retry"
            locked = rows[3:]
            doomed = conn.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 1, 'doomed')").fetchone()
            assert conn.execute("SELECT lonnymq.message_fail(%s, %s, 'fatal')", doomed).fetchone()[0] == "dead"
            if tuple(map(int, start.split("."))) >= (0, 9, 0):
                conn.execute(LOAD_0_9_0)
            held = conn.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 2, 'limited')").fetchall()
            if start == "0.7.0":
                # 0.7.0 marked a message created under REPEATABLE READ in
                # channel_floor_mark; 0.8.0 moves the marks into channel_floor.
                conn.execute("SELECT lonnymq.message_create('marked', 'm1')")
                conn.execute("SELECT count(*) FROM lonnymq.message_dequeue(60000, 1, 'marked')")
                # A floor raised past the message to come: only the mark lets
                # a dequeue find it.
                conn.execute("UPDATE lonnymq.channel SET floor_at = lonnymq.to_epoch(now()) WHERE name = 'marked'")
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                conn.execute("SELECT lonnymq.message_create('marked', 'urgent', -1000)")
                conn.execute("COMMIT")
                assert conn.execute("SELECT count(*) FROM lonnymq.channel_floor_mark").fetchone()[0] >= 1
            before = scenario.snapshot(conn)
            conn.execute("ALTER EXTENSION lonnymq UPDATE")
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'lonnymq'").fetchone()[0]
            after, new = scenario.project(conn, before)
            expected = scenario.carry(conn, before, scenario.clock(conn))
        with scenario.connect(cluster, fresh) as conn:
            conn.execute("CREATE EXTENSION lonnymq")
        yield {"cluster": cluster, "upgraded": upgraded, "fresh": fresh, "version": version, "from": start,
               "before": before, "after": after, "expected": expected, "new": new, "locked": locked, "held": held}
    finally:
        cluster.drop_database(upgraded)
        cluster.drop_database(fresh)


def test_the_update_reaches_the_default_version(dbs):
    assert dbs["version"] == DEFAULT_VERSION


def test_rows_survive_by_column_name(dbs):
    """Every row of every table of the old version (messages, keys, history,
    dead letters, schedules, grants, channels), every sequence position:
    unchanged by column name, but for what an upgrade retires or renames
    (scenario.RETIRED_*), whose values become what scenario.carry() says."""
    problems = scenario.differences(dbs["expected"], dbs["after"])
    assert not problems, f"upgraded from {dbs['from']}:\n" + "\n".join(problems) + \
        f"\n(new columns / tables: {dbs['new']})"
    # What the load put in each state is there to be carried.
    tables = dbs["before"]["tables"]
    assert len(tables["message_history"]) == 1 and len(tables["message_key"]) == 6 and len(tables["schedule"]) == 1
    assert len(tables["dead_letter"]) == 1 and sum(m["is_locked"] for m in tables["message"]) >= 5
    assert any(c["is_paused"] for c in tables["channel"])
    if "notify_payload" in dbs["before"]["columns"]["channel"]:
        with scenario.connect(dbs["cluster"], dbs["upgraded"]) as conn:
            payloads = dict(conn.execute("SELECT name, notify_payload FROM lonnymq.channel "
                                         "WHERE name IN ('notified', 'quiet')").fetchall())
            new_id = conn.execute("SELECT lonnymq._channel_id('notified')::text").fetchone()[0]
        assert payloads == {"notified": new_id, "quiet": ""}, payloads


def test_rows_survive_and_the_queue_works_on(dbs):
    with scenario.connect(dbs["cluster"], dbs["upgraded"]) as conn:
        # The marks' invariant and the states, as the upgrade left them: the
        # schedule's pending occurrence among them (0.15.0).
        assert_nothing_below_the_marks(conn, f"upgraded from {dbs['from']}")
        # Tokens handed out by the old version still complete, on both kinds of channel.
        for row in dbs["locked"] + dbs["held"]:
            assert conn.execute("SELECT lonnymq.message_complete(%s, %s)", row).fetchone()[0] is True
        # A duplicate of a key the old version stored is still a duplicate.
        existing = conn.execute("SELECT message_id FROM lonnymq.message_key WHERE key = 'key-6'").fetchone()[0]
        assert conn.execute("SELECT lonnymq.message_create('retry', 'again', NULL, 'key-6')").fetchone()[0] == existing
        # Everything ready is delivered: 20 plain, 2 limited, 2 retried (and
        # from 0.7.0 the message below the floor of a channel with marks).
        got = conn.execute("SELECT channel, count(*) FROM lonnymq.message_dequeue(60000, 100) "
                           "GROUP BY channel ORDER BY channel").fetchall()
        marked = [("marked", 1)] if dbs["from"] == "0.7.0" else []
        assert got == [("limited", 2), *marked, ("plain", 20), ("retry", 2)], got
        # The paused channel held its messages; resumed, it delivers them.
        conn.execute("SELECT lonnymq.channel_resume('paused')")
        got = conn.execute("SELECT convert_from(content, 'UTF8') FROM lonnymq.message_dequeue(60000, 100)").fetchall()
        assert got == [("q1",), ("q2",)], got
        # A channel that chose its id as payload notifies its new id.
        if "notify_payload" in dbs["before"]["columns"]["channel"]:
            with scenario.connect(dbs["cluster"], dbs["upgraded"]) as listener:
                listener.execute("LISTEN lonnymq")
                conn.execute("SELECT lonnymq.message_create('notified', 'n1')")
                conn.execute("SELECT lonnymq.message_create('quiet', 'n2')")
                got = [n.payload for n in listener.notifies(timeout=1.0, stop_after=2)]
                want = conn.execute("SELECT lonnymq._channel_id('notified')::text").fetchone()[0]
                assert got == [want, ""], got


def test_schema_is_the_fresh_install_schema(dbs):
    cluster = dbs["cluster"]
    up_dump, fresh_dump = schema.dump_schema(cluster, dbs["upgraded"]), schema.dump_schema(cluster, dbs["fresh"])
    up, fresh = schema.normalise(up_dump), schema.normalise(fresh_dump)
    assert any("message_channel_ix" in line and "IS NOT NULL" in line for line in fresh), \
        "the fresh schema lacks the 0.3.0 index predicate"
    if up != fresh:
        pytest.fail(f"the schema upgraded from {dbs['from']} differs from a fresh install:\n"
                    + schema.unified_diff(fresh, up, "fresh install", f"upgraded from {dbs['from']}"), pytrace=False)
    up, fresh = schema.ordered(up_dump), schema.ordered(fresh_dump)
    if up != fresh:
        pytest.fail(f"the columns of the schema upgraded from {dbs['from']} are not in a fresh install's order:\n"
                    + schema.unified_diff(fresh, up, "fresh install", f"upgraded from {dbs['from']}"), pytrace=False)
