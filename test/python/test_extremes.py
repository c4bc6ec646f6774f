"""The extremes of every integer and bigint parameter of every public function
(issue "Hardening…", item 1): 0.7.0's schedule_set took a p_start_at near the
minimum bigint, and from then on every message_dequeue and tick() failed with
22003 until the schedule was dropped.

Each call is made with each extreme (and -1, 0, 1) in place of one valid
argument, in a transaction that is rolled back afterwards. It must either
succeed or raise an SQLSTATE that its doc page lists; and when it succeeded,
the queue must still work in that transaction: a create, a dequeue of
everything due and tick() raise nothing.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from conftest import documented_sqlstates
from lonnymq_dev.limits import BIGINT_MAX, BIGINT_MIN, INTEGER_MAX, INTEGER_MIN

BIGINT = (BIGINT_MIN, -1, 0, 1, BIGINT_MAX)
INTEGER = (INTEGER_MIN, -1, 0, 1, INTEGER_MAX)

# Each function: a valid call with one {x} slot per integer or bigint
# parameter, named after it ({id} and {tok}: the locked message's id and token).
CALLS = {
    "channel_set": {
        "p_max_concurrency": "lonnymq.channel_set('c', p_max_concurrency => {x})",
        "p_max_size": "lonnymq.channel_set('c', p_max_size => {x})",
        "p_release_interval_ms": "lonnymq.channel_set('c', p_release_interval_ms => {x})",
        "p_max_attempts": "lonnymq.channel_set('c', p_max_attempts => {x})",
        "p_backoff_base_ms": "lonnymq.channel_set('c', p_backoff_base_ms => {x})",
        "p_backoff_max_ms": "lonnymq.channel_set('c', p_backoff_max_ms => {x})",
        "p_dedup_window_ms": "lonnymq.channel_set('c', p_dedup_window_ms => {x})",
    },
    "message_create": {
        "p_dequeue_at": "lonnymq.message_create('c', 'x', {x})",
        "p_after": "lonnymq.message_create('c', 'x', p_after => ARRAY[{x}]::bigint[])",
    },
    "message_create_batch": {
        "p_dequeue_at": "lonnymq.message_create_batch('c', ARRAY['x', 'y']::bytea[], ARRAY[{x}, 0]::bigint[])",
        "p_after": "lonnymq.message_create_batch('c', ARRAY['x', 'y']::bytea[], p_after => ARRAY[{x}]::bigint[])",
    },
    "message_publish": {
        "p_dequeue_at": "lonnymq.message_publish('ev', 'x', {x})",
        "p_after": "lonnymq.message_publish('ev', 'x', p_after => ARRAY[{x}]::bigint[])",
    },
    "message_publish_batch": {
        "p_dequeue_at": "lonnymq.message_publish_batch('ev', ARRAY['x', 'y']::bytea[], ARRAY[{x}, 0]::bigint[])",
        "p_after": "lonnymq.message_publish_batch('ev', ARRAY['x', 'y']::bytea[], p_after => ARRAY[{x}]::bigint[])",
    },
    "message_cancel": {"p_id": "lonnymq.message_cancel({x})"},
    "message_status": {"p_id": "lonnymq.message_status({x})"},
    "message_dequeue": {
        "p_lock_ms": "lonnymq.message_dequeue({x}, 5)",
        "p_limit": "lonnymq.message_dequeue(60000, {x})",
    },
    "message_complete_dequeue": {
        "p_ids": "lonnymq.message_complete_dequeue(ARRAY[{x}]::bigint[], ARRAY[{tok}], 60000)",
        "p_num_attempts": "lonnymq.message_complete_dequeue(ARRAY[{id}]::bigint[], ARRAY[{x}]::integer[], 60000)",
        "p_lock_ms": "lonnymq.message_complete_dequeue(NULL, NULL, {x}, 5)",
        "p_limit": "lonnymq.message_complete_dequeue(NULL, NULL, 60000, {x})",
    },
    "message_complete": {
        "p_id": "lonnymq.message_complete({x}, {tok})",
        "p_num_attempts": "lonnymq.message_complete({id}, {x})",
    },
    "message_defer": {
        "p_id": "lonnymq.message_defer({x}, {tok})",
        "p_num_attempts": "lonnymq.message_defer({id}, {x})",
        "p_dequeue_at": "lonnymq.message_defer({id}, {tok}, {x})",
    },
    "message_heartbeat": {
        "p_id": "lonnymq.message_heartbeat({x}, {tok}, 60000)",
        "p_num_attempts": "lonnymq.message_heartbeat({id}, {x}, 60000)",
        "p_lock_ms": "lonnymq.message_heartbeat({id}, {tok}, {x})",
    },
    "message_complete_batch": {
        "p_ids": "lonnymq.message_complete_batch(ARRAY[{x}]::bigint[], ARRAY[{tok}])",
        "p_num_attempts": "lonnymq.message_complete_batch(ARRAY[{id}]::bigint[], ARRAY[{x}]::integer[])",
    },
    "message_fail": {
        "p_id": "lonnymq.message_fail({x}, {tok}, 'e')",
        "p_num_attempts": "lonnymq.message_fail({id}, {x}, 'e')",
    },
    "dead_letter_redrive": {"p_ids": "lonnymq.dead_letter_redrive(NULL, ARRAY[{x}]::bigint[])"},
    "dead_letter_delete": {"p_ids": "lonnymq.dead_letter_delete(NULL, ARRAY[{x}]::bigint[])"},
    "history_prune": {"p_older_than_ms": "lonnymq.history_prune({x})"},
    "schedule_set": {
        "p_every_ms": "lonnymq.schedule_set('s', 'c', 'x', {x})",
        "p_start_at": "lonnymq.schedule_set('s', 'c', 'x', 60000, {x})",
    },
}

SETUP = """
SELECT lonnymq.channel_set('c', p_max_attempts => 3, p_retain_history => true);
SELECT lonnymq.message_create('c', convert_to('m' || g, 'UTF8')) FROM generate_series(1, 5) AS g;
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'c') AS d;
SELECT lonnymq.channel_set('d', p_max_attempts => 1);
SELECT lonnymq.message_create('d', 'x');
SELECT lonnymq.message_fail(d.id, d.num_attempts, 'boom') FROM lonnymq.message_dequeue(60000, 1, 'd') AS d;
SELECT lonnymq.schedule_set('every', 'c', 'tick', 60000);
SELECT lonnymq.topic_bind('ev', 'c'), lonnymq.topic_bind('#', 'd');
SELECT count(*) FROM lonnymq.message_dequeue(600000, 1, 'c');
"""


def integer_parameters(conn) -> set[tuple[str, str]]:
    """(function, parameter) for every integer or bigint (or array of them)
    input parameter of lonnymq's public functions."""
    rows = conn.execute("""
        SELECT p.proname, a.name
        FROM pg_proc AS p,
             unnest(p.proargnames[1:p.pronargs], p.proargtypes::oid[]) AS a (name, type)
        WHERE p.pronamespace = 'lonnymq'::regnamespace AND p.proname !~ '^_'
          AND a.type IN ('int4'::regtype, 'int8'::regtype, 'int4[]'::regtype, 'int8[]'::regtype)
    """).fetchall()
    return {(f, a) for f, a in rows}


def test_every_integer_parameter_is_covered(db):
    with db.connect() as conn:
        have = integer_parameters(conn)
    covered = {(f, a) for f, params in CALLS.items() for a in params}
    assert have == covered, f"not covered: {sorted(have - covered)}; no longer exist: {sorted(covered - have)}"


@pytest.mark.parametrize("function", sorted(CALLS))
def test_extremes_are_refused_with_a_documented_error_or_harmless(db, function):
    setup = db.connect()
    setup.execute(SETUP)
    mid, tok = setup.execute("SELECT id, num_attempts FROM lonnymq.message WHERE is_locked").fetchone()
    documented = documented_sqlstates(function)
    conn = db.connect(autocommit=False)
    problems = []
    for param, template in CALLS[function].items():
        kind = conn.execute(
            "SELECT a.type::regtype::text FROM pg_proc AS p, "
            "unnest(p.proargnames[1:p.pronargs], p.proargtypes::oid[]) AS a (name, type) "
            "WHERE p.pronamespace = 'lonnymq'::regnamespace AND p.proname = %s AND a.name = %s",
            (function, param)).fetchone()[0]
        conn.rollback()
        for value in (BIGINT if kind.startswith("bigint") else INTEGER):
            call = template.format(x=value, id=mid, tok=tok)
            try:
                conn.execute(sql.SQL("SELECT {}").format(sql.SQL(call)))
            except psycopg.Error as e:
                if e.sqlstate not in documented:
                    problems.append(f"{call}: {e.sqlstate} ({e}) is not on its page")
                conn.rollback()
                continue
            try:
                conn.execute("SELECT lonnymq.message_create('c', 'after')")
                conn.execute("SELECT count(*) FROM lonnymq.message_dequeue(60000, 100)")
                conn.execute("SELECT lonnymq.tick()")
            except psycopg.Error as e:
                problems.append(f"after {call}, the queue fails: {e.sqlstate} ({e})")
            conn.rollback()
    assert not problems, "\n".join(problems)
