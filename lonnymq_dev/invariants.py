"""The marks' invariant, checked by machine (doc/dequeue-design.md, "Marks").

No ready message lies below the position mark, and no message of
message_due_ix (scheduled, locked, or waiting for its admission or its
place; a schedule's pending occurrence, 0.15.0) lies below the due mark.  A
message below a mark is never delivered nor promoted by a dequeue: every
probe of the take and of the promotion starts at the mark (tick() still
finds such a message: its safety net).  Every schedule has exactly one
pending occurrence, scheduled and nothing else, and no occurrence is
without its schedule (0.15.0): else the schedule would make no message
again.  (0.13.1 to 0.14.0: no schedule's key in schedule_due_ix,
greatest(next_at, set_at), lies below the due mark.)  And no
message waiting for its admission (is_held) lies below its channel's
admit_from (0.13.1), where the admission's walk starts: it would wait for
ever; nor, from 0.15.0, behind room no walk will fill.  And a channel whose
takes claim (0.15.0) counts exactly the messages that hold its claims, and
every message its limit must count is claimed or will claim at its take.
Checked at
the end of every test that uses a database (test/python/conftest.py), and
by the concurrency, crash, upgrade and isolation-level tests at the points
they name.

With it, the message's states (sql/src/schema/message.sql): no row combines
what no state has, a held message that is ready or admitted, or an early
message without a position.  The tables enforce none of this (a CHECK
constraint cost the worker loop 4.8 %): these checks are its enforcement.
And (0.16.0) every waiting message is released by its parents' ends: its
counts are exactly the edges whose parents will still end.

The marks are read first, in a statement of their own: they only rise, and
a raise guarantees that nothing committed or in flight lies below what it
set, so a message seen below them by a later snapshot is a violation, even
while other sessions run.
"""

from __future__ import annotations

MARKS_SQL = ("SELECT pg_sequence_last_value('lonnymq.position_mark_seq'),"
             " pg_sequence_last_value('lonnymq.due_mark_seq')")

# Parameters: the position mark, the due mark (read first, by MARKS_SQL).
BELOW_THE_MARKS_SQL = (
    "SELECT count(*) FILTER (WHERE m.below = 'ready'), count(*) FILTER (WHERE m.below = 'due'),"
    " array_agg(m.id ORDER BY m.id)"
    " FROM (SELECT id, CASE"
    " WHEN position < %(mark)s THEN 'ready'"
    " WHEN position IS NULL AND NOT is_held AND greatest(dequeue_at, created_at) < %(due_mark)s THEN 'due'"
    " END AS below FROM lonnymq.message) AS m"
    " WHERE m.below IS NOT NULL")


# Parameter: the due mark.  (0.13.1 to 0.14.0: set_at, schedule_due_ix.)
SCHEDULES_BELOW_THE_DUE_MARK_SQL = (
    "SELECT array_agg(s.name ORDER BY s.name) FROM lonnymq.schedule AS s"
    " WHERE greatest(s.next_at, s.set_at) < %(due_mark)s")


# (0.15.0 on: message.schedule, schedule.occurrence_id.)  The names of the
# schedules without exactly one pending occurrence that is only scheduled
# (not ready, held, locked nor admitted), and of the occurrences whose
# schedule does not point at them.
SCHEDULES_STUCK_SQL = (
    "SELECT array_agg(x.name ORDER BY x.name) FROM ("
    " SELECT s.name FROM lonnymq.schedule AS s"
    " WHERE (SELECT count(*) FROM lonnymq.message AS m WHERE m.id = s.occurrence_id AND m.schedule = s.name"
    " AND m.position IS NULL AND NOT m.is_held AND NOT m.is_locked AND NOT m.is_admitted) <> 1"
    " UNION ALL"
    " SELECT m.schedule FROM lonnymq.message AS m WHERE m.schedule <> '' AND NOT EXISTS ("
    " SELECT 1 FROM lonnymq.schedule AS s WHERE s.name = m.schedule AND s.occurrence_id = m.id)"
    ") AS x")


# The combinations no state has (sql/src/schema/message.sql, _message_state).
ILLEGAL_STATES_SQL = (
    "SELECT array_agg(m.id ORDER BY m.id) FROM lonnymq.message AS m"
    " WHERE m.is_held AND (m.position IS NOT NULL OR m.is_admitted)"
    " OR m.is_early AND m.position IS NULL")


# Held messages no admission will reach (0.13.1 on: channel.admit_from):
# their channel has no row (whose counts admission keeps), or they lie below
# its admit_from, where its walks start; or (0.15.0 on: a create may hold its
# message at once, _channel_hold_try) behind room that no walk will fill:
# their channel, without a release interval and not paused, has fewer than
# max_concurrency admitted and placed unclaimed (a channel whose takes claim
# releases held messages into that room; in other limited channels a placed
# message is admitted), or admits no more (no limit, not paused), and no
# wake (message schedule '') is due to walk it again.
HELD_STUCK_SQL = (
    "SELECT array_agg(m.id ORDER BY m.id) FROM lonnymq.message AS m"
    " LEFT JOIN lonnymq.channel AS c ON c.id = m.channel_id AND c.name = m.channel"
    " WHERE m.is_held AND (c.id IS NULL OR m.dequeue_at < c.admit_from"
    " OR (c.release_interval_ms = 0 AND NOT c.is_paused AND c.num_admitted + (SELECT count(*) FROM lonnymq.message AS u"
    " WHERE u.channel_id = c.id AND u.channel = c.name AND u.position IS NOT NULL AND NOT u.is_admitted)"
    " < c.max_concurrency"
    " OR NOT (c.is_paused OR c.max_concurrency IS NOT NULL OR c.release_interval_ms > 0))"
    " AND NOT EXISTS (SELECT 1 FROM lonnymq.message AS w WHERE w.channel_id = c.id AND w.schedule = ''))")
# Channels whose claims are wrong (0.15.0 on: a channel with
# max_concurrency and no release interval, pause or order claims at the
# take, admission/_channel_claims.sql): num_admitted is not the number of
# its messages holding a claim (is_admitted), or a message the limit would
# not count: a lock out of the round order without a claim, or a placed
# unclaimed message whose take would not claim (not is_limited).
CLAIMS_WRONG_SQL = (
    "SELECT array_agg(c.name ORDER BY c.name) FROM lonnymq.channel AS c"
    " WHERE c.max_concurrency IS NOT NULL AND c.release_interval_ms = 0 AND NOT c.is_paused AND NOT c.is_ordered"
    " AND c.prefix IS NULL AND (c.num_admitted <> (SELECT count(*) FROM lonnymq.message AS m"
    " WHERE m.channel_id = c.id AND m.channel = c.name AND m.is_admitted)"
    " OR EXISTS (SELECT 1 FROM lonnymq.message AS m WHERE m.channel_id = c.id AND m.channel = c.name"
    " AND NOT m.is_admitted AND (m.is_locked AND m.position IS NULL OR m.position IS NOT NULL AND NOT m.is_limited)))")
# Waiting messages (0.16.0 on: doc/dependencies.md) that no end will
# release.  A message waits while it has its own count (message_wait,
# bucket -1); it must then be out of every probe's reach (dequeue_at at
# least 2^61, neither placed, held nor locked), and its counts must be
# exactly its pending edges.  An edge is pending while its parent is a
# message that knows it has dependents (has_dependents: its completion,
# bury or cancel resolves them), or has a release row whose cursor (its
# state) is below the child (a promotion will resolve it).  A child of at
# most 64 parents counts its pending edges in its own count (bucket -1);
# one of more counts there its buckets above zero, and each bucket its
# pending edges.  (A count whose message is gone, cancelled while it
# waited, is counted down to nothing by its parents' ends: not checked.)
WAITING_STUCK_SQL = (
    "WITH pending AS ("
    " SELECT e.child_id, e.bucket, count(*) AS n FROM lonnymq.message_edge AS e"
    " JOIN lonnymq.message AS p ON p.id = e.parent_id"
    " WHERE p.schedule IS NULL AND p.has_dependents"
    " OR p.schedule = '' AND p.key IS NOT NULL AND convert_from(p.state, 'UTF8')::bigint < e.child_id"
    " GROUP BY e.child_id, e.bucket),"
    " waiting AS (SELECT c.*, w.num_waiting AS own FROM lonnymq.message AS c"
    " JOIN lonnymq.message_wait AS w ON w.child_id = c.id AND w.bucket = -1 WHERE c.schedule IS NULL)"
    " SELECT array_agg(c.id ORDER BY c.id) FROM waiting AS c"
    " WHERE c.dequeue_at < 2305843009213693952 OR c.position IS NOT NULL OR c.is_held OR c.is_locked"
    " OR c.own <= 0"
    " OR c.own <> coalesce((SELECT sum(x.n) FROM pending AS x WHERE x.child_id = c.id AND x.bucket = -1), 0)"
    " + (SELECT count(*) FROM lonnymq.message_wait AS w WHERE w.child_id = c.id AND w.bucket >= 0 AND w.num_waiting > 0)"
    " OR EXISTS (SELECT 1 FROM lonnymq.message_wait AS w WHERE w.child_id = c.id AND w.bucket >= 0 AND w.num_waiting"
    " <> coalesce((SELECT sum(x.n) FROM pending AS x WHERE x.child_id = c.id AND x.bucket = w.bucket), 0))")
# (0.13.1 to 0.14.0: no wakes, no hold at create.)
HELD_BELOW_ADMIT_FROM_SQL = (
    "SELECT array_agg(m.id ORDER BY m.id) FROM lonnymq.message AS m"
    " JOIN lonnymq.channel AS c ON c.id = m.channel_id AND c.name = m.channel"
    " WHERE m.is_held AND m.dequeue_at < c.admit_from")


def marks(conn) -> tuple[int, int]:
    """The position mark and the due mark, as they are now."""
    return tuple(conn.execute(MARKS_SQL).fetchone())


def below_the_marks(conn) -> tuple[int, int, list[int]]:
    """(ready messages below the position mark, messages of message_due_ix
    below the due mark, their ids): (0, 0, []) when the invariant holds.
    conn should be in autocommit (READ COMMITTED): an older snapshot of the
    caller's could hide a violation."""
    mark, due_mark = marks(conn)
    ready, due, ids = conn.execute(BELOW_THE_MARKS_SQL, {"mark": mark, "due_mark": due_mark}).fetchone()
    return ready, due, ids or []


def _has_column(conn, table: str, column: str) -> bool:
    """Whether the installed version has the column (an older one, as the
    upgrade tests install, may not)."""
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = %s)",
                        (table, column)).fetchone()[0]


def schedules_stuck(conn) -> list[str]:
    """The names of the schedules that no dequeue would run again (none when
    the invariant holds): from 0.15.0, those without exactly one pending
    occurrence, and stray occurrences (SCHEDULES_STUCK_SQL); 0.13.1 to
    0.14.0, those whose key lies below the due mark; before, none (no
    set_at)."""
    if _has_column(conn, "lonnymq.message", "schedule"):
        return conn.execute(SCHEDULES_STUCK_SQL).fetchone()[0] or []
    if not _has_column(conn, "lonnymq.schedule", "set_at"):
        return []
    _, due_mark = marks(conn)
    return conn.execute(SCHEDULES_BELOW_THE_DUE_MARK_SQL, {"due_mark": due_mark}).fetchone()[0] or []


def held_stuck(conn) -> list[int]:
    """The ids of the held messages no admission will reach (HELD_STUCK_SQL;
    none when the invariant holds, or before 0.13.1)."""
    if not _has_column(conn, "lonnymq.channel", "admit_from"):
        return []
    if not _has_column(conn, "lonnymq.message", "schedule"):
        return conn.execute(HELD_BELOW_ADMIT_FROM_SQL).fetchone()[0] or []
    return conn.execute(HELD_STUCK_SQL).fetchone()[0] or []


def claims_wrong(conn) -> list[str]:
    """The names of the channels whose claims are wrong (CLAIMS_WRONG_SQL;
    none when the invariant holds, or before 0.15.0)."""
    if not _has_column(conn, "lonnymq.message", "is_limited"):
        return []
    return conn.execute(CLAIMS_WRONG_SQL).fetchone()[0] or []


def waiting_stuck(conn) -> list[int]:
    """The ids of the waiting messages no parent's end would release
    (WAITING_STUCK_SQL; none when the invariant holds, or before 0.16.0)."""
    if not _has_column(conn, "lonnymq.message", "has_dependents"):
        return []
    return conn.execute(WAITING_STUCK_SQL).fetchone()[0] or []


def illegal_states(conn) -> list[int]:
    """The ids of the messages whose columns combine what no state has."""
    return conn.execute(ILLEGAL_STATES_SQL).fetchone()[0] or []


def assert_nothing_below_the_marks(conn, what: str = "") -> None:
    """Fail, naming the messages and schedules, when one lies below a mark,
    or a message is in no state (illegal_states)."""
    ready, due, ids = below_the_marks(conn)
    assert (ready, due) == (0, 0), (
        f"{what + ': ' if what else ''}{ready} ready message(s) below the position mark and {due} below "
        f"the due mark, never to be delivered; ids {ids[:20]}")
    schedules = schedules_stuck(conn)
    assert not schedules, (
        f"{what + ': ' if what else ''}schedule(s) that no dequeue would run again (no pending occurrence, "
        f"or one that is not only scheduled, or a stray occurrence): {schedules[:20]}")
    illegal = illegal_states(conn)
    assert not illegal, (
        f"{what + ': ' if what else ''}{len(illegal)} message(s) in no state (held and ready or admitted, or early "
        f"without a position); ids {illegal[:20]}")
    held = held_stuck(conn)
    assert not held, (
        f"{what + ': ' if what else ''}{len(held)} held message(s) never to be admitted (below their channel's "
        f"admit_from, or behind room with no wake); ids {held[:20]}")
    waiting = waiting_stuck(conn)
    assert not waiting, (
        f"{what + ': ' if what else ''}{len(waiting)} waiting message(s) no parent's end would release (out of "
        f"their waiting state, or counts that are not their pending edges); ids {waiting[:20]}")
    claims = claims_wrong(conn)
    assert not claims, (
        f"{what + ': ' if what else ''}channel(s) whose claims are wrong (num_admitted is not the count of "
        f"claimed messages, or a lock or placed message the limit does not count): {claims[:20]}")


# The same checks as one function, for SQL-only callers: the isolation specs
# (test/isolation/) call it in their teardown, after every permutation, when
# no session of the spec is running.  Made from the statements above, so the
# invariant is stated once; the marks are read first, in a statement of their
# own, as below_the_marks does.  It lives in a schema of its own, not in
# lonnymq's: the specs drop and create the extension before each permutation.
CHECK_SCHEMA = "lonnymq_check"


def check_function_sql(schema: str = CHECK_SCHEMA) -> str:
    """CREATE SCHEMA and CREATE FUNCTION <schema>.below_the_marks(): one row,
    (0, 0, NULL, NULL, NULL) when the invariant holds, else the counts and
    the ids or names of what lies below a mark (never to be delivered)."""
    below = BELOW_THE_MARKS_SQL.replace("%(mark)s", "v_mark").replace("%(due_mark)s", "v_due_mark")
    return f"""CREATE SCHEMA IF NOT EXISTS {schema};
CREATE OR REPLACE FUNCTION {schema}.below_the_marks(
    OUT ready_below bigint, OUT due_below bigint, OUT ids bigint[],
    OUT schedules_stuck text[], OUT held_stuck bigint[], OUT in_no_state bigint[], OUT waiting_stuck bigint[])
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_mark bigint;
    v_due_mark bigint;
BEGIN
    {MARKS_SQL} INTO v_mark, v_due_mark;
    {below} INTO ready_below, due_below, ids;
    {SCHEDULES_STUCK_SQL} INTO schedules_stuck;
    {HELD_STUCK_SQL} INTO held_stuck;
    {ILLEGAL_STATES_SQL} INTO in_no_state;
    {WAITING_STUCK_SQL} INTO waiting_stuck;
END
$fn$;
"""


if __name__ == "__main__":
    # `python3 -m lonnymq_dev.invariants`: the function's SQL, for psql
    # (make installcheck installs it before the isolation specs).
    print(check_function_sql(), end="")
