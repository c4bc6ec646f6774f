"""Channels configured by a name pattern (0.12.0): channel_set('tenant-*', ...)
configures every channel whose name starts with 'tenant-' and that has no
channel_set of its own, existing and future; the longest prefix wins;
channel_drop('tenant-*') removes it.  A follower has a row only while its
pattern's limits keep admission counts for it."""

from __future__ import annotations

import time

import psycopg
import pytest


def _config(db, channel: str):
    """What a channel follows: its pattern's name (NULL: its own or the
    defaults) and the settings the tests vary."""
    return db.call(
        "SELECT (c).pattern, (c).max_attempts, (c).max_concurrency, (c).retain_history "
        "FROM (SELECT lonnymq._channel_config(lonnymq._channel_id(%(n)s), %(n)s) AS c) AS x", {"n": channel})[0]


def _rows(db) -> list:
    """The channel rows of followers (admission counts kept for them)."""
    return db.call("SELECT name, num_admitted FROM lonnymq.channel WHERE pattern IS NOT NULL ORDER BY name")


def _take(db, channel: str | None = None, n: int = 10) -> list:
    return db.call("SELECT channel, convert_from(content, 'UTF8'), id, num_attempts "
                   "FROM lonnymq.message_dequeue(60000, %s, %s) ORDER BY id", (n, channel))


def test_the_longest_prefix_wins_and_a_channel_set_of_its_own_wins_over_any(db):
    db.call("SELECT lonnymq.channel_set('tenant-*', p_max_attempts => 2)")
    db.call("SELECT lonnymq.channel_set('tenant-vip-*', p_max_attempts => 9)")
    db.call("SELECT lonnymq.channel_set('tenant-own', p_max_attempts => 5)")
    assert _config(db, "tenant-1") == ("tenant-*", 2, None, False)
    assert _config(db, "tenant-vip-1") == ("tenant-vip-*", 9, None, False)
    assert _config(db, "tenant-vip") == ("tenant-*", 2, None, False)  # 'tenant-vip' lacks the last '-'
    assert _config(db, "tenant-viq-1") == ("tenant-*", 2, None, False)  # the first probe finds 'tenant-vip-'
    assert _config(db, "tenant-own") == (None, 5, None, False)
    assert _config(db, "other") == (None, None, None, False)
    db.call("SELECT lonnymq.channel_set('*', p_max_attempts => 3)")  # every channel's default
    assert _config(db, "other") == ("*", 3, None, False)
    assert db.call("SELECT lonnymq.channel_drop('tenant-vip-*')") == [(True,)]
    assert _config(db, "tenant-vip-1") == ("tenant-*", 2, None, False)
    assert db.call("SELECT lonnymq.channel_drop('tenant-vip-*')") == [(False,)]
    assert db.call("SELECT lonnymq.channel_drop('*')") == [(True,)]
    assert _config(db, "other") == (None, None, None, False)


def test_a_pattern_set_before_the_first_message_gives_retries_and_history(db):
    db.call("SELECT lonnymq.channel_set('tenant-*', p_max_attempts => 2, p_backoff_base_ms => 0, "
            "p_backoff_jitter => 0, p_retain_history => true)")
    db.call("SELECT lonnymq.message_create('tenant-1', 'a')")
    db.call("SELECT lonnymq.message_create('tenant-2', 'b')")
    got = {c: (i, n) for c, _, i, n in _take(db)}
    assert db.call("SELECT lonnymq.message_complete(%s, %s)", got["tenant-1"]) == [(True,)]
    assert db.call("SELECT lonnymq.message_fail(%s, %s, 'boom')", got["tenant-2"]) == [("retry",)]
    (_, _, i, n), = _take(db)
    assert db.call("SELECT lonnymq.message_fail(%s, %s, 'boom')", (i, n)) == [("dead",)]
    assert db.call("SELECT channel FROM lonnymq.message_history") == [("tenant-1",)]
    assert db.call("SELECT channel FROM lonnymq.dead_letter") == [("tenant-2",)]
    assert db.call("SELECT count(*) FROM lonnymq.channel") == [(1,)], "a pattern without limits made rows"


def test_a_limited_pattern_limits_each_channel_and_its_rows_go_when_they_drain(db):
    db.call("SELECT lonnymq.channel_set('order-*', p_max_concurrency => 1)")
    for channel in ("order-1", "order-2"):
        for content in ("a", "b"):
            db.call("SELECT lonnymq.message_create(%s, %s)", (channel, content))
    assert _rows(db) == []
    first = _take(db)
    assert sorted((c, m) for c, m, _, _ in first) == [("order-1", "a"), ("order-2", "a")]
    assert _rows(db) == [("order-1", 1), ("order-2", 1)]
    assert _take(db) == [], "a channel under max_concurrency 1 delivered a second message"
    for _, _, i, n in first:
        assert db.call("SELECT lonnymq.message_complete(%s, %s)", (i, n)) == [(True,)]
    second = _take(db)
    assert sorted((c, m) for c, m, _, _ in second) == [("order-1", "b"), ("order-2", "b")]
    for _, _, i, n in second:
        assert db.call("SELECT lonnymq.message_complete(%s, %s)", (i, n)) == [(True,)]
    assert _rows(db) == [], "drained followers kept their rows"
    assert db.call("SELECT count(*) FROM lonnymq.channel") == [(1,)]


def test_an_ordered_pattern_keeps_a_failed_head_in_place(db):
    db.call("SELECT lonnymq.channel_set('o-*', p_ordered => true, p_backoff_base_ms => 200, p_backoff_jitter => 0)")
    db.call("SELECT lonnymq.message_create('o-1', 'A')")
    db.call("SELECT lonnymq.message_create('o-1', 'B')")
    (_, m, i, n), = _take(db)
    assert m == "A"
    assert db.call("SELECT lonnymq.message_fail(%s, %s, 'boom')", (i, n)) == [("retry",)]
    assert _take(db) == [], "B passed its ordered channel's failed head"
    deadline = time.monotonic() + 5
    while not (got := _take(db)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [g[1] for g in got] == ["A"]


def test_a_release_interval_row_outlives_the_drain_until_its_release(db):
    db.call("SELECT lonnymq.channel_set('r-*', p_release_interval_ms => 300)")
    db.call("SELECT lonnymq.message_create('r-1', 'a')")
    (_, _, i, n), = _take(db)
    assert db.call("SELECT lonnymq.message_complete(%s, %s)", (i, n)) == [(True,)]
    # Its release is 300 ms ahead: the row keeps it, so a new message waits.
    assert _rows(db) == [("r-1", 0)]
    db.call("SELECT lonnymq.message_create('r-1', 'b')")
    assert _take(db) == [], "a message was delivered inside its channel's release interval"
    deadline = time.monotonic() + 5
    while not (got := _take(db)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [g[1] for g in got] == ["b"]
    assert db.call("SELECT lonnymq.message_complete(%s, %s)", got[0][2:]) == [(True,)]
    time.sleep(0.35)
    db.call("SELECT lonnymq.tick()")
    assert _rows(db) == [], "tick left a drained follower's row after its release"


def test_new_limits_on_a_pattern_reach_its_channels_messages(db):
    """Messages queued while the pattern had no limits: the new limit holds
    all but one of each channel, which a take claims (each channel gets a row
    counting its claims, none yet); raising it lets more through; dropping
    the pattern frees them and the rows go."""
    db.call("SELECT lonnymq.channel_set('t-*')")
    for channel in ("t-1", "t-2"):
        for content in "abc":
            db.call("SELECT lonnymq.message_create(%s, %s)", (channel, content))
    db.call("SELECT lonnymq.channel_set('t-*', p_max_concurrency => 1)")
    assert _rows(db) == [("t-1", 0), ("t-2", 0)]
    assert sorted(m for _, m, _, _ in _take(db)) == ["a", "a"]
    assert _take(db) == []
    db.call("SELECT lonnymq.channel_set('t-*', p_max_concurrency => 2)")
    assert sorted(m for _, m, _, _ in _take(db)) == ["b", "b"]
    assert _take(db) == []
    assert db.call("SELECT lonnymq.channel_drop('t-*')") == [(True,)]
    assert sorted(m for _, m, _, _ in _take(db)) == ["c", "c"]
    assert _rows(db) == []
    assert db.call("SELECT count(*) FROM lonnymq.channel") == [(0,)]


def test_a_longer_pattern_takes_over_and_a_channel_set_detaches_a_follower(db):
    db.call("SELECT lonnymq.channel_set('a-*', p_max_concurrency => 1)")
    for content in "xyz":
        db.call("SELECT lonnymq.message_create('a-b-1', %s)", (content,))
    assert [m for _, m, _, _ in _take(db)] == ["x"]
    db.call("SELECT lonnymq.channel_set('a-b-*', p_max_concurrency => 2)")
    assert db.call("SELECT pattern, max_concurrency FROM lonnymq.channel WHERE name = 'a-b-1'") == [("a-b-*", 2)]
    assert [m for _, m, _, _ in _take(db)] == ["y"]
    db.call("SELECT lonnymq.channel_set('a-b-1', p_max_concurrency => 3)")
    assert db.call("SELECT pattern, max_concurrency FROM lonnymq.channel WHERE name = 'a-b-1'") == [(None, 3)]
    assert [m for _, m, _, _ in _take(db)] == ["z"]
    db.call("SELECT lonnymq.channel_drop('a-b-*')")
    assert db.call("SELECT pattern, max_concurrency FROM lonnymq.channel WHERE name = 'a-b-1'") == [(None, 3)]


def test_pausing_a_follower_keeps_its_pattern(db):
    db.call("SELECT lonnymq.channel_set('p-*', p_max_attempts => 4)")
    db.call("SELECT lonnymq.message_create('p-1', 'a')")
    assert db.call("SELECT lonnymq.channel_pause('p-1')") == [(True,)]
    assert _take(db) == []
    assert db.call("SELECT pattern, max_attempts FROM lonnymq.channel WHERE name = 'p-1'") == [("p-*", 4)]
    assert db.call("SELECT lonnymq.channel_resume('p-1')") == [(True,)]
    assert [m for _, m, _, _ in _take(db)] == ["a"]


@pytest.mark.parametrize("sql, error", [
    ("SELECT lonnymq.message_create('x*', 'a')", psycopg.errors.InvalidParameterValue),
    ("SELECT lonnymq.message_create_batch('x*', ARRAY['a']::bytea[])", psycopg.errors.InvalidParameterValue),
    ("SELECT lonnymq.schedule_set('s', 'x*', 'a', 1000)", psycopg.errors.InvalidParameterValue),
    ("SELECT lonnymq.channel_set('x*', p_max_size => 10)", psycopg.errors.FeatureNotSupported),
    ("SELECT lonnymq.channel_pause('x*')", psycopg.errors.FeatureNotSupported),
])
def test_a_pattern_holds_no_messages_and_no_per_channel_state(db, sql, error):
    before = db.call("SELECT count(*) FROM lonnymq.channel")
    with pytest.raises(error):
        db.call(sql)
    assert db.call("SELECT count(*) FROM lonnymq.channel") == before
    assert db.call("SELECT count(*) FROM lonnymq.message") == [(0,)]


def _prefix_reads(conn, sql: str, params=()) -> tuple[int, int]:
    """Descents into channel_prefix_key, and index entries it returned, for
    one statement."""
    q = ("SELECT pg_stat_get_xact_numscans('lonnymq.channel_prefix_key'::regclass),"
         " pg_stat_get_xact_tuples_returned('lonnymq.channel_prefix_key'::regclass)")
    before = conn.execute(q).fetchone()
    conn.execute(sql, params).fetchall()
    after = conn.execute(q).fetchone()
    return after[0] - before[0], after[1] - before[1]


def test_finding_a_pattern_is_bounded_by_the_name_not_by_the_patterns(db):
    """10,000 patterns, 254 of them built so that each probe misses by one
    character ('b'*k + 'a*' for k < 254): the name 'b'*255 costs one probe
    per character at worst, and a name whose greatest prefix matches costs
    one."""
    db.call("SELECT count(lonnymq.channel_set(repeat('b', k) || 'a*')) FROM generate_series(0, 253) AS k")
    for i in range(1, 9747, 1000):  # (each call holds its channels' locks until it commits)
        db.call("SELECT count(lonnymq.channel_set('p' || k || '-*', p_max_attempts => 7)) "
                "FROM generate_series(%s, least(%s + 999, 9746)) AS k", (i, i))
    assert db.call("SELECT count(*) FROM lonnymq.channel WHERE prefix IS NOT NULL") == [(10_000,)]
    with db.connect(autocommit=False) as conn:
        worst = _prefix_reads(conn, "SELECT lonnymq._channel_config(lonnymq._channel_id(repeat('b', 255)), "
                                    "repeat('b', 255))")
        typical = _prefix_reads(conn, "SELECT lonnymq._channel_config(lonnymq._channel_id('p5000-42'), 'p5000-42')")
        created = _prefix_reads(conn, "SELECT lonnymq.message_create('p5000-42', 'a')")
        conn.rollback()
    assert worst[0] <= 256 and worst[1] <= 256, f"the adversarial name: {worst} (descents, entries)"
    assert typical == (1, 1)
    assert created == (1, 1)
