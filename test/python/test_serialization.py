"""Which calls raise 40001 (serialization_failure) under REPEATABLE READ, as
every function's doc page says (issue "Hardening…", item 3).

Under REPEATABLE READ (and SERIALIZABLE) PostgreSQL refuses to lock, update
or delete a row that a transaction committed after the caller's snapshot
changed.  For each public function: a REPEATABLE READ transaction takes its
snapshot, another session commits the change the page names, and the call
must fail with 40001; the same call in READ COMMITTED, after the same
change, succeeds.  (SERIALIZABLE adds failures found by predicate locking,
at any statement or at COMMIT: the pages say so; they are not provoked
here.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest
from psycopg import errors


@dataclass
class Case:
    setup: str  # run first, autocommit
    change: str  # committed by another session after the snapshot
    call: str  # the call under test


ONE_LOCKED = """
SELECT lonnymq.channel_set('c', p_max_concurrency => 5, p_max_size => 100, p_max_attempts => 5);
SELECT lonnymq.message_create('c', convert_to('m' || g, 'UTF8')) FROM generate_series(1, 4) AS g;
SELECT count(*) FROM lonnymq.message_dequeue(600000, 1, 'c');
"""
# The message the setup locked, and its token.
LOCKED = "(SELECT id FROM lonnymq.message WHERE is_locked)"
TOKEN = "(SELECT num_attempts FROM lonnymq.message WHERE is_locked)"
HEARTBEAT = f"SELECT lonnymq.message_heartbeat({LOCKED}, {TOKEN}, 900000)"
DEAD = """
SELECT lonnymq.channel_set('d', p_max_attempts => 1, p_backoff_base_ms => 0);
SELECT lonnymq.message_create('d', 'x');
SELECT lonnymq.message_fail(d.id, d.num_attempts, 'boom') FROM lonnymq.message_dequeue(600000, 1, 'd') AS d;
"""

CASES = {
    # A settle call meets its message changed (here by a heartbeat).
    "message_complete": Case(ONE_LOCKED, HEARTBEAT, f"SELECT lonnymq.message_complete({LOCKED}, {TOKEN})"),
    "message_complete_batch": Case(
        ONE_LOCKED, HEARTBEAT, f"SELECT lonnymq.message_complete_batch(ARRAY[{LOCKED}], ARRAY[{TOKEN}])"),
    "message_complete_dequeue": Case(
        ONE_LOCKED, HEARTBEAT,
        f"SELECT count(*) FROM lonnymq.message_complete_dequeue(ARRAY[{LOCKED}], ARRAY[{TOKEN}], 600000)"),
    "message_defer": Case(ONE_LOCKED, HEARTBEAT, f"SELECT lonnymq.message_defer({LOCKED}, {TOKEN})"),
    "message_fail": Case(ONE_LOCKED, HEARTBEAT, f"SELECT lonnymq.message_fail({LOCKED}, {TOKEN}, 'x')"),
    "message_heartbeat": Case(ONE_LOCKED, HEARTBEAT, f"SELECT lonnymq.message_heartbeat({LOCKED}, {TOKEN}, 1000)"),
    # A channel with limits: its row changes with every admission (a create, a complete).
    "message_cancel": Case(
        ONE_LOCKED, f"SELECT lonnymq.message_complete({LOCKED}, {TOKEN})",
        "SELECT lonnymq.message_cancel((SELECT max(id) FROM lonnymq.message))"),
    "message_create": Case(ONE_LOCKED, "SELECT lonnymq.message_create('c', 'other')",
                           "SELECT lonnymq.message_create('c', 'mine')"),
    "message_create_batch": Case(ONE_LOCKED, "SELECT lonnymq.message_create('c', 'other')",
                                 "SELECT lonnymq.message_create_batch('c', ARRAY['mine']::bytea[])"),
    "message_dequeue": Case(ONE_LOCKED, "SELECT count(*) FROM lonnymq.message_dequeue(600000, 1, 'c')",
                            "SELECT count(*) FROM lonnymq.message_dequeue(600000, 1, 'c')"),
    "channel_set": Case(ONE_LOCKED, "SELECT count(*) FROM lonnymq.message_dequeue(600000, 1, 'c')",
                        "SELECT lonnymq.channel_set('c', p_max_concurrency => 6)"),
    "channel_pause": Case(ONE_LOCKED, "SELECT count(*) FROM lonnymq.message_dequeue(600000, 1, 'c')",
                          "SELECT lonnymq.channel_pause('c')"),
    "channel_resume": Case(ONE_LOCKED + "SELECT lonnymq.channel_pause('c');",
                           "SELECT lonnymq.channel_set('c', p_max_concurrency => 6)",
                           "SELECT lonnymq.channel_resume('c')"),
    "channel_drop": Case(ONE_LOCKED, "SELECT count(*) FROM lonnymq.message_dequeue(600000, 1, 'c')",
                         "SELECT lonnymq.channel_drop('c', p_purge => true)"),
    # Dead letters, history and schedules changed by another admin call.
    "dead_letter_redrive": Case(
        DEAD, "UPDATE lonnymq.dead_letter SET last_error = 'seen'",
        "SELECT lonnymq.dead_letter_redrive('d')"),
    "dead_letter_delete": Case(
        DEAD, "UPDATE lonnymq.dead_letter SET last_error = 'seen'", "SELECT lonnymq.dead_letter_delete('d')"),
    "history_prune": Case(
        "SELECT lonnymq.channel_set('h', p_retain_history => true);"
        "SELECT lonnymq.message_create('h', 'x');"
        "SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(600000, 1, 'h') AS d;",
        "UPDATE lonnymq.message_history SET state = 'seen'", "SELECT lonnymq.history_prune(0)"),
    "schedule_set": Case(
        "SELECT lonnymq.schedule_set('s', 'c', 'x', 60000);",
        "SELECT lonnymq.schedule_set('s', 'c', 'y', 60000)", "SELECT lonnymq.schedule_set('s', 'c', 'z', 60000)"),
    "schedule_drop": Case(
        "SELECT lonnymq.schedule_set('s', 'c', 'x', 60000);",
        "SELECT lonnymq.schedule_set('s', 'c', 'y', 60000)", "SELECT lonnymq.schedule_drop('s')"),
    "tick": Case(
        "SELECT lonnymq.schedule_set('s', 'c', 'x', 60000, lonnymq.to_epoch(now()) - 1000);",
        "UPDATE lonnymq.schedule SET content = 'y'", "SELECT lonnymq.tick()"),
}


def _run(db, case: Case, isolation: str) -> Callable[[], None]:
    setup = db.connect()
    setup.execute(case.setup)
    caller = db.connect(autocommit=False)
    caller.execute(f"BEGIN ISOLATION LEVEL {isolation}")
    caller.execute("SELECT count(*) FROM lonnymq.channel")  # the snapshot, for REPEATABLE READ
    db.connect().execute(case.change)

    def call():
        try:
            caller.execute(case.call)
            caller.commit()
        finally:
            if not caller.closed:
                caller.rollback()
    return call


@pytest.mark.parametrize("function", sorted(CASES))
def test_repeatable_read_raises_40001_on_a_row_changed_after_the_snapshot(db, function):
    call = _run(db, CASES[function], "REPEATABLE READ")
    with pytest.raises(errors.SerializationFailure):
        call()


@pytest.mark.parametrize("function", sorted(CASES))
def test_read_committed_does_not(db, function):
    _run(db, CASES[function], "READ COMMITTED")()


@pytest.mark.parametrize("function", sorted(CASES))
def test_the_page_lists_40001(function):
    from conftest import documented_sqlstates

    assert "40001" in documented_sqlstates(function), f"the doc page of {function} does not list 40001"
