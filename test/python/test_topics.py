"""Topics (0.12.0): topic_bind(pattern, channel), topic_unbind, message_publish,
message_publish_batch and topic_routes.  A publish creates one message per
bound channel in the caller's transaction; patterns match routing keys as
AMQP topic exchanges do ('*' one word, '#' zero or more)."""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _amqp_match(pattern: str, key: str) -> bool:
    """The reference: RabbitMQ's topic matching, word by word."""
    def match(p: list[str], k: list[str]) -> bool:
        if not p:
            return not k
        if p[0] == "#":
            return any(match(p[1:], k[i:]) for i in range(len(k) + 1))
        if not k:
            return False
        return (p[0] == "*" or p[0] == k[0]) and match(p[1:], k[1:])
    return match(pattern.split("."), key.split("."))


WORDS = st.sampled_from(["a", "b", "order", "x+y", "ü", ""])


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.lists(st.one_of(WORDS, st.sampled_from(["*", "#"])), min_size=1, max_size=5).map(".".join),
       key=st.lists(WORDS, min_size=1, max_size=5).map(".".join))
def test_patterns_match_keys_as_amqp_topic_exchanges_do(module_db, pattern, key):
    if not pattern or not key:
        return
    regex, = module_db.call("SELECT lonnymq._topic_regex(%s)", (pattern,))[0]
    got = key == pattern if regex is None else module_db.call("SELECT %s ~ %s", (key, regex))[0][0]
    assert got == _amqp_match(pattern, key), (pattern, key, regex)


def test_a_publish_creates_one_message_per_bound_channel_in_the_callers_transaction(db):
    db.call("SELECT lonnymq.topic_bind('order.created', 'audit')")
    db.call("SELECT lonnymq.topic_bind('order.*', 'mail')")
    db.call("SELECT lonnymq.topic_bind('order.#', 'mail')")  # a second match: still one copy
    db.call("SELECT lonnymq.topic_bind('#.paid', 'billing')")
    assert db.call("SELECT lonnymq.topic_routes('order.created')") == [("audit",), ("mail",)]
    with db.connect(autocommit=False) as conn:
        assert conn.execute("SELECT lonnymq.message_publish('order.created', 'x')").fetchone() == (2,)
        conn.rollback()
    assert db.call("SELECT count(*) FROM lonnymq.message") == [(0,)], "a rolled-back publish left copies"
    assert db.call("SELECT lonnymq.message_publish('order.created', 'x')") == [(2,)]
    assert db.call("SELECT lonnymq.message_publish('order.paid', 'y')") == [(2,)]
    assert db.call("SELECT channel, convert_from(content, 'UTF8') FROM lonnymq.message ORDER BY channel, id") == [
        ("audit", "x"), ("billing", "y"), ("mail", "x"), ("mail", "y")]


def test_each_copy_has_its_own_retries_and_dead_letters(db):
    db.call("SELECT lonnymq.channel_set('fragile', p_max_attempts => 1)")
    db.call("SELECT lonnymq.topic_bind('e', 'fragile')")
    db.call("SELECT lonnymq.topic_bind('e', 'sturdy')")
    db.call("SELECT lonnymq.message_publish('e', 'x')")
    got = dict(((c, (i, n)) for c, i, n in db.call(
        "SELECT channel, id, num_attempts FROM lonnymq.message_dequeue(60000, 10)")))
    assert db.call("SELECT lonnymq.message_fail(%s, %s, 'boom')", got["fragile"]) == [("dead",)]
    assert db.call("SELECT lonnymq.message_complete(%s, %s)", got["sturdy"]) == [(True,)]
    assert db.call("SELECT channel FROM lonnymq.dead_letter") == [("fragile",)]


def test_a_key_deduplicates_per_channel(db):
    db.call("SELECT lonnymq.topic_bind('e', 'a')")
    db.call("SELECT lonnymq.message_create('a', 'old', p_key => 'k')")
    db.call("SELECT lonnymq.topic_bind('e', 'b')")
    assert db.call("SELECT lonnymq.message_publish('e', 'new', p_key => 'k')") == [(2,)]
    assert db.call("SELECT lonnymq.message_publish('e', 'new', p_key => 'k')") == [(2,)]
    assert db.call("SELECT channel, convert_from(content, 'UTF8') FROM lonnymq.message ORDER BY channel") == [
        ("a", "old"), ("b", "new")]
    assert db.call("SELECT lonnymq.message_publish_batch('e', ARRAY['p', 'q']::bytea[], p_keys => ARRAY['k', 'k2'])"
                   ) == [(4,)]
    assert db.call("SELECT count(*) FROM lonnymq.message") == [(4,)]


def test_nothing_bound_is_zero_or_an_error_that_changes_nothing(db):
    assert db.call("SELECT lonnymq.message_publish('nobody', 'x')") == [(0,)]
    assert db.call("SELECT lonnymq.message_publish_batch('nobody', ARRAY['x']::bytea[])") == [(0,)]
    with pytest.raises(psycopg.errors.NoDataFound):
        db.call("SELECT lonnymq.message_publish('nobody', 'x', p_require_route => true)")
    with pytest.raises(psycopg.errors.NoDataFound):
        db.call("SELECT lonnymq.message_publish_batch('nobody', ARRAY['x']::bytea[], p_require_route => true)")
    # Bad input is refused even when nothing is bound.
    with pytest.raises(psycopg.errors.NullValueNotAllowed):
        db.call("SELECT lonnymq.message_publish('nobody', NULL)")
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        db.call("SELECT lonnymq.message_publish_batch('nobody', ARRAY[ARRAY['x']]::bytea[])")
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        db.call("SELECT lonnymq.topic_bind('a', 'pattern-*')")
    assert db.call("SELECT count(*) FROM lonnymq.message") == [(0,)]


def test_a_channel_at_max_size_is_not_counted(db):
    db.call("SELECT lonnymq.channel_set('small', p_max_size => 1)")
    db.call("SELECT lonnymq.topic_bind('e', 'small')")
    db.call("SELECT lonnymq.topic_bind('e', 'big')")
    assert db.call("SELECT lonnymq.message_publish('e', 'x')") == [(2,)]
    assert db.call("SELECT lonnymq.message_publish('e', 'y')") == [(1,)]


def test_unbind(db):
    db.call("SELECT lonnymq.topic_bind('e.*', 'a')")
    assert db.call("SELECT lonnymq.topic_unbind('e.*', 'a')") == [(True,)]
    assert db.call("SELECT lonnymq.topic_unbind('e.*', 'a')") == [(False,)]
    assert db.call("SELECT lonnymq.message_publish('e.x', 'x')") == [(0,)]


def _entries(conn, sql: str) -> dict:
    q = ("SELECT i.relname, pg_stat_get_xact_tuples_returned(i.oid) FROM pg_class AS i "
         "WHERE i.relnamespace = 'lonnymq'::regnamespace AND i.relkind = 'i' AND i.relname LIKE 'topic_binding%%'")
    before = dict(conn.execute(q).fetchall())
    conn.execute(sql).fetchall()
    after = dict(conn.execute(q).fetchall())
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def test_a_publish_reads_its_bindings_not_the_others(db):
    """10,000 exact bindings of other keys and 1,000 wildcard ones of other
    first words: a publish of 'hot' reads the 3 exact bindings of its key,
    the 2 wildcard bindings of its first word and the 2 that start with a
    wildcard, and tests nothing else."""
    db.call("SELECT count(lonnymq.topic_bind('k' || i, 'c' || (i %% 100))) FROM generate_series(1, 10000) AS i")
    db.call("SELECT count(lonnymq.topic_bind('w' || i || '.*', 'w' || i)) FROM generate_series(1, 1000) AS i")
    db.call("SELECT count(lonnymq.topic_bind('hot', 'h' || i)) FROM generate_series(1, 3) AS i")
    db.call("SELECT lonnymq.topic_bind('hot.#', 'hot-all'), lonnymq.topic_bind('hot.*', 'hot-one')")
    db.call("SELECT lonnymq.topic_bind('#', 'everything'), lonnymq.topic_bind('*.x', 'x')")
    with db.connect() as conn:
        conn.execute("ANALYZE lonnymq.topic_binding")
    with db.connect(autocommit=False) as conn:
        got = _entries(conn, "SELECT lonnymq.message_publish('hot', 'x')")
        conn.rollback()
    assert got["topic_binding_pkey"] == 3
    assert got["topic_binding_wildcard_ix"] == 4
    assert db.call("SELECT lonnymq.message_publish('hot', 'x')") == [(5,)]  # h1-h3, hot-all, everything
