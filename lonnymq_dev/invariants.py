"""The marks' invariant, checked by machine (doc/dequeue-design.md, "Marks").

No ready message lies below the position mark, and no message of
message_due_ix (scheduled, locked, or waiting for its admission or its
place) lies below the due mark.  A message below a mark is never delivered:
every probe of the take and of the promotion starts at the mark.  Checked at
the end of every test that uses a database (test/python/conftest.py), and
by the concurrency, crash, upgrade and isolation-level tests at the points
they name.

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


def assert_nothing_below_the_marks(conn, what: str = "") -> None:
    """Fail, naming the messages, when a message lies below a mark."""
    ready, due, ids = below_the_marks(conn)
    assert (ready, due) == (0, 0), (
        f"{what + ': ' if what else ''}{ready} ready message(s) below the position mark and {due} below "
        f"the due mark, never to be delivered; ids {ids[:20]}")
