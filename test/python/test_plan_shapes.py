"""Every statement that create, dequeue and complete run is bounded whatever
the statistics say (doc/dequeue-design.md; the issue that asked for 0.11.0's
data model, item 6).

A plan is bounded when its shape cannot be anything else: a probe by key, or
the first rows of an ordered index range.  A generic plan is made once per
session from the statistics of that moment, and a plan made while the queue
looked empty (a healthy queue that autovacuum has just analysed) is kept
when the queue has grown: 0.10.1's take, planned then, walked the whole of
message_pkey for one row.  So each hot call is planned in a new session
under three sets of statistics, and every nested statement's plan (auto_explain
with log_nested_statements, sent to the client as notices) must reach every
lonnymq relation through an index scan with an index condition:

  nearly empty   a few messages, ANALYZE;
  large          30,000 messages in one channel and 2,000 in 500 others;
  dead versions  10,000 messages created and consumed while another session
                 holds a REPEATABLE READ snapshot with an xid (their versions
                 stay), ANALYZE.

No Seq Scan, no Bitmap scan, and no Index Scan without an Index Cond (an
index walked from its beginning, as a full scan or a join's inner side with
only a Join Filter).
"""

from __future__ import annotations

import re

import pytest

RELATIONS = ("message", "channel", "channel_quota", "message_key", "dead_letter", "message_history", "schedule")
NODE_RE = re.compile(
    r"^(?P<indent>\s*)(?:->\s+)?(?P<kind>Seq Scan|Bitmap Heap Scan|Bitmap Index Scan|Index Scan|Index Only Scan)"
    r"(?: Backward)?(?: using (?P<index>\S+))? on (?P<rel>\w+)"
)


def unbounded_scans(plan: str) -> list[str]:
    """The scan nodes of a plan that read a lonnymq relation other than by an
    index condition."""
    lines = plan.splitlines()
    bad = []
    for i, line in enumerate(lines):
        m = NODE_RE.match(line)
        if not m or m.group("rel") not in RELATIONS:
            continue
        if m.group("kind") not in ("Index Scan", "Index Only Scan"):
            bad.append(line.strip())
            continue
        # The node's own details follow it, indented deeper, until its
        # first child ("->") or a line at its level or above.
        depth = len(line) - len(line.lstrip())
        details = []
        for follow in lines[i + 1:]:
            indent = len(follow) - len(follow.lstrip())
            if indent <= depth or follow.lstrip().startswith("->"):
                break
            details.append(follow.strip())
        if not any(d.startswith("Index Cond:") for d in details):
            bad.append(line.strip())
    return bad


def collect_plans(conn) -> list[str]:
    plans: list[str] = []

    def on_notice(diag):
        text = diag.message_primary or ""
        if "Query Text:" in text:
            plans.append(text)

    conn.add_notice_handler(on_notice)
    for setting in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                    "SET auto_explain.log_nested_statements = on", "SET auto_explain.log_level = notice",
                    "SET client_min_messages = notice"):
        conn.execute(setting)
    return plans


def run_hot_calls(conn) -> None:
    """create, dequeue and complete in every shape, and the calls that end a
    delivery otherwise."""
    ex = conn.execute
    ex("SELECT lonnymq.message_create('big', 'plain')")
    ex("SELECT lonnymq.message_create('big', 'urgent', -5)")
    ex("SELECT lonnymq.message_create('big', 'keyed', NULL, 'plan-key')")
    ex("SELECT lonnymq.message_create('big', 'later', lonnymq.to_epoch(now()) + 3600000)")
    ex("SELECT lonnymq.message_create('brand-new', 'first')")
    ex("SELECT lonnymq.message_create('limited', 'l')")
    ex("SELECT lonnymq.message_create_batch('big', ARRAY['a', 'b', 'c']::bytea[], NULL, ARRAY['k1', NULL, 'k3'])")
    one = ex("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000)").fetchall()
    batch = ex("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 10)").fetchall()
    ex("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 2, 'limited')").fetchall()
    ex("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 3, 'big')").fetchall()
    (a, ta), (b, tb), (c, tc), (d, td), (e, te), (f, tf) = batch[:6]
    got = ex("SELECT id, num_attempts FROM lonnymq.message_complete_dequeue(%s, %s, 60000)",
             ([one[0][0]], [one[0][1]])).fetchall()
    assert len(got) == 1
    assert ex("SELECT lonnymq.message_complete(%s, %s)", (a, ta)).fetchone()[0] is True
    assert ex("SELECT lonnymq.message_complete_batch(%s, %s)", ([b, c], [tb, tc])).fetchone()[0] == 2
    assert ex("SELECT lonnymq.message_defer(%s, %s, NULL, 's')", (d, td)).fetchone()[0] is True
    assert ex("SELECT lonnymq.message_heartbeat(%s, %s, 120000)", (e, te)).fetchone()[0] is True
    assert ex("SELECT lonnymq.message_fail(%s, %s, 'e')", (f, tf)).fetchone()[0] == "retry"
    ex("SELECT lonnymq.message_cancel(%s)", (got[0][0],))


def fill(conn, state: str, holder) -> None:
    ex = conn.execute
    ex("SELECT lonnymq.channel_set('limited', p_max_concurrency => 2)")
    if state == "nearly empty":
        ex("SELECT count(*) FROM lonnymq.message_create_batch('big', array_fill('\\x00'::bytea, ARRAY[20]))")
    elif state == "large":
        ex("SELECT count(*) FROM generate_series(1, 3) AS g, lonnymq.message_create_batch('big', array_fill('\\x00'::bytea, ARRAY[10000]))")
        ex("SELECT count(lonnymq.message_create('c' || (g % 500), '\\x00')) FROM generate_series(1, 2000) AS g")
        ex("SELECT count(*) FROM lonnymq.message_create_batch('limited', array_fill('\\x00'::bytea, ARRAY[50]))")
    else:
        ex("SELECT count(*) FROM lonnymq.message_create_batch('big', array_fill('\\x00'::bytea, ARRAY[20]))")
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT txid_current()")
        ids: list[int] = []
        tokens: list[int] = []
        for i in range(10_000):
            ex("SELECT lonnymq.message_create(%s, '\\x00')", ("big" if i % 2 else f"c{i % 100}",))
            row = ex("SELECT id, num_attempts FROM lonnymq.message_complete_dequeue(%s, %s, 60000)",
                     (ids, tokens)).fetchone()
            ids, tokens = ([row[0]], [row[1]]) if row else ([], [])
    ex("ANALYZE")


@pytest.mark.parametrize("state", ["nearly empty", "large", "dead versions"])
def test_every_hot_statement_probes_an_index_whatever_the_statistics(db, state):
    with db.connect() as conn, db.connect() as holder:
        fill(conn, state, holder)
        with db.connect() as fresh:  # a new session: its plans are made now
            plans = collect_plans(fresh)
            run_hot_calls(fresh)
        holder.execute("ROLLBACK")
    touching = [p for p in plans if any(re.search(rf" on {r}\b", p) for r in RELATIONS)]
    assert len(touching) >= 25, f"only {len(touching)} plans touched lonnymq's tables: the test proves little"
    failures = {}
    for plan in touching:
        bad = unbounded_scans(plan)
        if bad:
            query = plan.split("Query Text:", 1)[1].strip().splitlines()[0][:100]
            failures.setdefault(query, bad)
    assert not failures, f"{state}: scans without an index condition:\n" + "\n".join(
        f"  {q}\n      " + "\n      ".join(b) for q, b in failures.items())


def test_the_check_catches_a_walk_of_the_primary_key():
    """The rule itself: the plan the issue found (0.10.1's take planned while
    the queue looked small) fails it; a probe by key passes."""
    walk = """Update on message m
  ->  Nested Loop
        Join Filter: (m.id = h.id)
        ->  CTE Scan on head h
        ->  Index Scan using message_pkey on message m"""
    probe = """Update on message m
  ->  Index Scan using message_pkey on message m
        Index Cond: (id = $1)"""
    assert unbounded_scans(walk) == ["->  Index Scan using message_pkey on message m"]
    assert unbounded_scans(probe) == []
    assert unbounded_scans("Seq Scan on channel c") == ["Seq Scan on channel c"]
