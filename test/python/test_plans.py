"""EXPLAIN of every statement the hot calls run, on pathological data.

The pgTAP file 080_bounded_probes.sql counts the index entries each call
reads; this test looks at the plans themselves.  auto_explain, loaded in the
session with log_nested_statements and log_level = notice, sends the plan of
every statement executed inside lonnymq's functions to the client, so what is
checked is exactly what runs (not a copy of the query text).  Every plan that
touches a lonnymq table must reach it through an index: no Seq Scan, no
Bitmap scan, no Sort over messages or channels.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

PATHOLOGICAL = Path(__file__).resolve().parents[1] / "pgtap" / "include" / "pathological.psql"
TABLES = ("message", "channel", "channel_quota", "message_key", "dead_letter", "message_history", "schedule")
SCAN_RE = re.compile(r"(Seq Scan|Bitmap Heap Scan|Index Scan|Index Only Scan|Bitmap Index Scan)"
                     r"(?: Backward)?(?: using (\S+))? on (\w+)")


@pytest.fixture(scope="module")
def pathological_db(module_db):
    module_db.psql(PATHOLOGICAL.read_text())
    return module_db


class PlanCollector:
    def __init__(self, conn):
        self.plans: list[str] = []
        conn.add_notice_handler(self._on_notice)
        with conn.cursor() as cur:
            cur.execute("LOAD 'auto_explain'")
            cur.execute("SET auto_explain.log_min_duration = 0")
            cur.execute("SET auto_explain.log_nested_statements = on")
            cur.execute("SET auto_explain.log_level = notice")
            cur.execute("SET client_min_messages = notice")

    def _on_notice(self, diag):
        text = diag.message_primary or ""
        if "plan:" in text and "Query Text:" in text:
            self.plans.append(text)

    def take(self) -> list[str]:
        plans, self.plans = self.plans, []
        return plans


def query_text(plan: str) -> str:
    return plan.split("Query Text:", 1)[1].strip().split("\n")[0][:100]


def bad_nodes(plan: str) -> list[str]:
    """Plan lines that read a lonnymq table other than by an index probe."""
    bad = []
    for line in plan.splitlines():
        m = SCAN_RE.search(line)
        if m and m.group(3) in TABLES and m.group(1) in ("Seq Scan", "Bitmap Heap Scan", "Bitmap Index Scan"):
            bad.append(line.strip())
    # A Sort is only allowed over lonnymq's own small output: arrays
    # (unnest), the rows a statement just wrote (a CTE whose body is an
    # UPDATE, DELETE or INSERT: its rows are the ones its probes took, which
    # 080 bounds), or rows read under a LIMIT (0.11.0: a take ranks its own
    # turns and as many early messages of their channels).  Never over a
    # scan of a lonnymq table that a LIMIT does not bound.
    if any(not sorts_own_output(plan, i) and not sorts_limited_rows(plan, i) for i in sort_lines(plan)):
        for table in TABLES:
            if re.search(rf"Scan(?: using \S+)? on {table}\b", plan):
                bad.append(f"Sort over {table}")
    return bad


def sort_lines(plan: str) -> list[int]:
    return [i for i, line in enumerate(plan.splitlines()) if re.match(r"\s*(?:->\s+)?Sort\b(?!\s+(?:Key|Method|Space))", line)]


def sorts_own_output(plan: str, at: int) -> bool:
    """Whether the Sort node on line `at` sorts a Function Scan or a CTE Scan
    of a data-modifying CTE (its direct input, not its CTE definitions)."""
    lines = plan.splitlines()
    depth = lines[at].index("Sort")     # its details and inputs sit 2 deeper
    inputs = []
    for line in lines[at + 1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent < depth + 2:
            break
        if indent == depth + 2 and line.lstrip().startswith("->"):
            inputs.append(line.strip())
    if len(inputs) != 1:
        return False
    if re.match(r"->\s+Function Scan on ", inputs[0]):
        return True
    cte = re.match(r"->\s+CTE Scan on (\w+)", inputs[0])
    if not cte:
        return False
    for i, line in enumerate(lines):
        if line.strip() == f"CTE {cte.group(1)}":
            body = next((x for x in lines[i + 1:] if x.strip()), "")
            return bool(re.match(r"\s*->\s+(?:Update|Delete|Insert) on ", body))
    return False


def _node_column(line: str) -> int:
    """Where a plan line's node name starts (after its arrow, if any)."""
    arrow = line.find("->")
    return arrow + 4 if arrow >= 0 and not line[:arrow].strip() else len(line) - len(line.lstrip())


def _block(lines: list[str], at: int) -> range:
    """Line `at` and the lines of everything below it (its inputs and details)."""
    col = _node_column(lines[at])
    end = at + 1
    while end < len(lines) and (not lines[end].strip() or _node_column(lines[end]) > col):
        end += 1
    return range(at, end)


def _has_limit_above(lines: list[str], at: int, top: int) -> bool:
    """Whether a Limit node is an ancestor of line `at`, below line `top`."""
    col = _node_column(lines[at])
    for i in range(at - 1, top, -1):
        c = _node_column(lines[i])
        if lines[i].strip().startswith("->") and c < col:
            if re.match(r"\s*->\s+Limit\b", lines[i]):
                return True
            col = c
    return False


def sorts_limited_rows(plan: str, at: int) -> bool:
    """Whether every scan of a lonnymq table that feeds the Sort on line `at`
    (below it, or in a CTE it reads, transitively) sits under a Limit node or
    in a data-modifying CTE."""
    lines = plan.splitlines()
    todo, seen = [(_block(lines, at), at)], set()
    while todo:
        block, top = todo.pop()
        body = next((lines[i] for i in block if i > top and lines[i].strip()), "")
        if top != at and re.match(r"\s*->\s+(?:Update|Delete|Insert) on ", body):
            continue
        for i in block:
            m = SCAN_RE.search(lines[i])
            if m and m.group(3) in TABLES and not _has_limit_above(lines, i, top - 1):
                return False
            cte = re.search(r"CTE Scan on (\w+)", lines[i])
            if cte and cte.group(1) not in seen:
                seen.add(cte.group(1))
                start = next((j for j, x in enumerate(lines) if x.strip() == f"CTE {cte.group(1)}"), None)
                if start is not None:
                    todo.append((_block(lines, start), start))
    return True


def test_every_hot_statement_is_an_index_probe(pathological_db):
    conn = pathological_db.connect()
    plans = PlanCollector(conn)
    calls = [
        # dequeue through every path: rotation, recovery among locks, a
        # saturated channel's expired lock, past 6,000 saturated/rate-limited
        # channels, a channel with nothing deliverable, p_channel, batches
        "SELECT * FROM lonnymq.message_dequeue(60000)",
        "SELECT * FROM lonnymq.message_dequeue(60000)",
        "SELECT * FROM lonnymq.message_dequeue(60000)",
        "SELECT * FROM lonnymq.message_dequeue(60000)",
        "SELECT * FROM lonnymq.message_dequeue(60000, 10)",
        "SELECT * FROM lonnymq.message_dequeue(60000, 1, 'sat17')",
        "SELECT * FROM lonnymq.message_dequeue(60000, 1, 'alllocked')",
        "SELECT * FROM lonnymq.message_dequeue(60000, 100, 'backlog')",
        # create into a busy, a waiting, a saturated and a new channel, and a
        # size-limited one
        "SELECT lonnymq.message_create('backlog', 'n')",
        "SELECT lonnymq.message_create('future7', 'n')",
        "SELECT lonnymq.message_create('sat9', 'n', -1)",
        "SELECT lonnymq.message_create('brand-new', 'n')",
        "SELECT lonnymq.channel_set('sized', p_max_size => 5)",
        "SELECT lonnymq.message_create('sized', 'n')",
        # the wake-up just left for brand-new is applied by this dequeue
        "SELECT * FROM lonnymq.message_dequeue(60000, 1, 'brand-new')",
    ]
    with conn.cursor() as cur:
        for sql in calls:
            cur.execute(sql)
        cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 3, 'backlog')")
        (a, ta), (b, tb), (c, tc) = cur.fetchall()
        for sql, args in [
            ("SELECT lonnymq.message_complete(%s, %s)", (a, ta)),
            ("SELECT lonnymq.message_defer(%s, %s, NULL, 's')", (b, tb)),
            ("SELECT lonnymq.message_heartbeat(%s, %s, 120000)", (c, tc)),
        ]:
            cur.execute(sql, args)
            assert cur.fetchone()[0] is True, sql
        # The 0.2.0 calls on the same data: keys (held and new), batches,
        # fail (retry and dead), cancel, a due schedule, a poisoned lock,
        # stats of one channel, redrive, history.
        cur.execute("SELECT lonnymq.channel_set('poison', p_max_attempts => 1)")
        cur.execute("SELECT lonnymq.message_create('poison', 'p')")
        cur.execute("SELECT id FROM lonnymq.message_dequeue(1, 1, 'poison')")
        cur.execute("SELECT pg_sleep(0.01)")
        cur.execute("SELECT lonnymq.message_create('poison', 'q')")
        for sql in [
            "SELECT lonnymq.message_create('keyed', 'n', NULL, 'key-7')",
            "SELECT lonnymq.message_create('keyed', 'n', NULL, 'plan-key')",
            "SELECT lonnymq.message_create_batch('backlog', ARRAY['a', 'b', 'c']::bytea[])",
            "SELECT lonnymq.message_create_batch('keyed', ARRAY['a', 'b']::bytea[], NULL, ARRAY['key-9', 'k-new'])",
            "SELECT lonnymq.message_create_batch('sized', ARRAY['a', 'b', 'c', 'd', 'e', 'f']::bytea[])",
            "SELECT * FROM lonnymq.message_dequeue(60000, 1, 'poison')",
            "UPDATE lonnymq.message SET dequeue_at = 0, created_at = lonnymq._clock_ms()"
            " WHERE id = (SELECT occurrence_id FROM lonnymq.schedule WHERE name = 'sched77')",
            "SELECT * FROM lonnymq.message_dequeue(60000, 1, 'target')",
            "SELECT lonnymq.history_prune(86400000)",
            "SELECT lonnymq.dead_letter_redrive('future5', NULL)",
            "SELECT lonnymq.dead_letter_redrive(NULL, ARRAY[1, 2, 3]::bigint[])",
            "SELECT lonnymq.tick()",
        ]:
            cur.execute(sql)
        cur.execute("SELECT lonnymq.channel_set('hist', p_retain_history => true, p_max_attempts => 2,"
                    " p_dedup_window_ms => 60000, p_max_size => 100)")
        cur.execute("SELECT lonnymq.message_create_batch('hist', ARRAY['1', '2', '3', '4', '5', '6']::bytea[],"
                    " NULL, ARRAY['h1', 'h2', 'h3', 'h4', 'h5', 'h6'])")
        cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 6, 'hist')")
        rows = cur.fetchall()
        assert len(rows) == 6
        cur.execute("SELECT lonnymq.message_complete(%s, %s)", rows[0])
        cur.execute("SELECT lonnymq.message_complete_batch(%s, %s)",
                    ([r[0] for r in rows[1:3]], [r[1] for r in rows[1:3]]))
        assert cur.fetchone()[0] == 2
        cur.execute("SELECT lonnymq.message_fail(%s, %s, 'e')", rows[3])
        assert cur.fetchone()[0] == "retry"
        cur.execute("SELECT lonnymq.message_fail(%s, %s, 'e')", rows[4])
        cur.execute("SELECT lonnymq.message_defer(%s, %s)", rows[5])
        cur.execute("SELECT lonnymq.message_cancel(%s)", (rows[5][0],))
        assert cur.fetchone()[0] is True
        cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 2, 'backlog')")
        rows = cur.fetchall()
        cur.execute("SELECT lonnymq.message_complete_batch(%s, %s)",
                    ([r[0] for r in rows], [r[1] for r in rows]))
        cur.execute("SELECT lonnymq.channel_pause('target')")
        cur.execute("SELECT lonnymq.channel_resume('target')")
    collected = plans.take()

    touching = [p for p in collected if any(re.search(rf" on {t}\b", p) for t in TABLES)]
    distinct = {query_text(p) for p in touching}
    # Every kind of statement must have been seen, or this test proves little.
    assert len(distinct) >= 20, f"only {len(distinct)} distinct statements were explained: {sorted(distinct)}"

    failures = {query_text(p): bad_nodes(p) for p in touching if bad_nodes(p)}
    assert not failures, "statements that do not probe an index:\n" + "\n".join(
        f"{q}: {nodes}" for q, nodes in failures.items()
    ) + "\n\nplans:\n" + "\n".join(p for p in touching if bad_nodes(p))


# Two channels of 150,000 ready messages each, in their turns (round g), and
# 5,000 configured idle channels, so that the channel table is not trivially
# small.
ONE_BIG_CHANNEL = """
INSERT INTO lonnymq.message (channel, channel_id, position, dequeue_at, created_at, content)
SELECT 'big' || c, lonnymq._channel_id('big' || c), g::bigint * 1048576 + (lonnymq._channel_id('big' || c) & 1048575), g, 0, 'x'
FROM generate_series(1, 2) AS c, generate_series(1, 150000) AS g;
SELECT count(lonnymq.channel_set('idle' || g, p_max_attempts => 5)) FROM generate_series(1, 5000) AS g;
ANALYZE lonnymq.channel;
ANALYZE lonnymq.message;
"""


def test_plans_stay_index_probes_when_one_channel_holds_the_whole_table(db):
    """The other shape of pathological data: few channels, so the planner's
    generic estimate for "one channel's ready messages" is most of the table.
    A plan that is only right for many small channels (say, a merge join
    over the primary key for a batch) would read the whole table here."""
    db.psql(ONE_BIG_CHANNEL)
    conn = db.connect()
    plans = PlanCollector(conn)
    with conn.cursor() as cur:
        cur.execute("SELECT * FROM lonnymq.message_dequeue(60000)")
        cur.execute("SELECT * FROM lonnymq.message_dequeue(60000, 10)")
        cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 100, 'big1')")
        rows = cur.fetchall()
        assert len(rows) == 100
        for row in rows[:3]:
            cur.execute("SELECT lonnymq.message_complete(%s, %s)", row)
        cur.execute("SELECT lonnymq.message_defer(%s, %s)", rows[3])
        cur.execute("SELECT lonnymq.message_heartbeat(%s, %s, 1000)", rows[4])
        cur.execute("SELECT lonnymq.message_create('big1', 'n')")
        cur.execute("SELECT lonnymq.message_create('big1', 'n', NULL, 'a-key')")
        cur.execute("SELECT lonnymq.message_create_batch('big1', ARRAY['a', 'b']::bytea[], NULL, ARRAY['k1', 'k2'])")
        cur.execute("SELECT lonnymq.message_complete_batch(%s, %s)",
                    ([r[0] for r in rows[5:50]], [r[1] for r in rows[5:50]]))
        assert cur.fetchone()[0] == 45
        cur.execute("SELECT lonnymq.message_fail(%s, %s, 'e')", rows[50])
    collected = plans.take()
    touching = [p for p in collected if any(re.search(rf" on {t}\b", p) for t in TABLES)]
    assert len({query_text(p) for p in touching}) >= 10
    failures = {query_text(p): bad_nodes(p) for p in touching if bad_nodes(p)}
    assert not failures, "statements that do not probe an index:\n" + "\n".join(
        f"{q}: {nodes}" for q, nodes in failures.items()
    )
    # and no plan walks an index from its start: every scan of a lonnymq
    # table has an index condition
    unbounded = [query_text(p) for p in touching
                 if re.search(r"Index (?:Only )?Scan using \S+ on (?:message|channel)\b[^\n]*\n(?!\s+(?:Index Cond|Filter))",
                              p)]
    assert not unbounded, f"index scans without a condition: {unbounded}"


def test_channel_stats_and_dead_letter_delete_read_index_ranges_only(pathological_db):
    """channel_stats counts (it cannot be a bounded probe: its figures are
    counts), and dead_letter_delete of a channel deletes all of its dead
    letters, but both only over index ranges of the channels asked for:
    never a sequential scan of message or dead_letter, whatever their size."""
    conn = pathological_db.connect()
    plans = PlanCollector(conn)
    with conn.cursor() as cur:
        cur.execute("SELECT * FROM lonnymq.channel_stats WHERE channel = 'backlog'")
        assert cur.fetchone()[1] >= 90000
        cur.execute("SELECT * FROM lonnymq.channel_stats WHERE channel = 'future5'")
        cur.execute("SELECT sum(ready) FROM lonnymq.channel_stats")
        cur.execute("SELECT lonnymq.dead_letter_delete('future6')")
        assert cur.fetchone()[0] == 100
        cur.execute("SELECT lonnymq.dead_letter_delete(NULL, ARRAY(SELECT id FROM lonnymq.dead_letter "
                    "WHERE channel = 'future7' LIMIT 3))")
        assert cur.fetchone()[0] == 3
    collected = plans.take()
    assert collected, "no plan was explained"
    seq = [line.strip() for p in collected for line in p.splitlines()
           if re.search(r"Seq Scan on (message|dead_letter)\b", line)]
    assert not seq, f"channel_stats scans a table: {seq}"


# Indexes whose leading column is not the one a lookup by id names: a plan that
# reaches them with an Index Cond on id alone scans them whole.
NON_ID_INDEXES = ("message_channel_ix", "message_ready_ix", "message_due_ix", "message_held_ix", "message_early_ix",
                  "dead_letter_channel_ix")


def id_only_scans(plan: str) -> list[str]:
    """Index scans of a non-id index whose condition starts with id (a whole-index walk)."""
    lines = plan.splitlines()
    bad = []
    for i, line in enumerate(lines):
        m = SCAN_RE.search(line)
        if not m or m.group(2) not in NON_ID_INDEXES:
            continue
        for follow in lines[i + 1:i + 4]:
            cond = re.search(r"Index Cond: \(+(\w+)", follow)
            if cond:
                if cond.group(1) == "id":
                    bad.append(line.strip() + " / " + follow.strip())
                break
    return bad


def test_plans_made_on_a_drained_vacuumed_queue_stay_index_probes(db):
    """A worker's generic plans are made from the statistics of the moment they
    are first needed.  After a queue is drained and vacuumed the planner sees
    zero tuples, and every plan costs about nothing: 0.2.0 then chose seq
    scans, hash joins, and, for lookups by id, whole scans of
    message_channel_ix.  Those plans stay in the session while the queue grows
    again (until the next autovacuum).  Here the plans are made on a drained,
    vacuumed queue with autovacuum off, the queue then grows to 60,000
    messages (30,000 locked) with no new statistics, and the same calls must
    still be index probes, lookups by id through the primary key."""
    setup = db.connect()
    setup.autocommit = True
    with setup.cursor() as cur:
        for table in ("message", "channel", "dead_letter", "message_key"):
            cur.execute(f"ALTER TABLE lonnymq.{table} SET (autovacuum_enabled = false)")
        cur.execute("SELECT lonnymq.message_create('q', 'x') FROM generate_series(1, 200)")
        cur.execute("SELECT lonnymq.message_complete(d.id, d.num_attempts) "
                    "FROM lonnymq.message_dequeue(60000, 1000, 'q') AS d")
        cur.execute("VACUUM ANALYZE lonnymq.message")
        cur.execute("VACUUM ANALYZE lonnymq.channel")
        cur.execute("SELECT reltuples FROM pg_class WHERE oid = 'lonnymq.message'::regclass")
        assert cur.fetchone()[0] == 0, "the drained queue should have zero tuples in its statistics"

    conn = db.connect()
    conn.autocommit = True
    plans = PlanCollector(conn)

    def calls(cur):
        cur.execute("SELECT lonnymq.message_create('q', 'n')")
        cur.execute("SELECT lonnymq.message_create('q', 'k', NULL, %s)", (f"key-{len(plans.plans)}",))
        cur.execute("SELECT count(*) FROM lonnymq.message_create_batch('q', ARRAY['a', 'b', 'c', 'd', 'e', 'f']::bytea[])")
        cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000)")
        one = cur.fetchone()
        cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 4)")
        four = cur.fetchall()
        cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, 2, 'q')")
        two = cur.fetchall()
        assert one and len(four) == 4 and len(two) == 2
        cur.execute("SELECT lonnymq.message_complete(%s, %s)", one)
        assert cur.fetchone()[0] is True
        cur.execute("SELECT lonnymq.message_heartbeat(%s, %s, 60000)", four[0])
        cur.execute("SELECT lonnymq.message_defer(%s, %s)", four[1])
        cur.execute("SELECT lonnymq.message_fail(%s, %s, 'e')", four[2])
        cur.execute("SELECT lonnymq.message_complete_batch(%s, %s)",
                    ([r[0] for r in two], [r[1] for r in two]))
        cur.execute("SELECT lonnymq.message_create('q', 'c') AS id")
        cur.execute("SELECT lonnymq.message_cancel(%s)", (cur.fetchone()[0],))

    with conn.cursor() as cur:
        calls(cur)                      # the plans are made here, on zero tuples
    plans.take()
    with setup.cursor() as cur:         # the queue grows; no ANALYZE, no autovacuum
        # half of them ready in their turns, half locked (expired: the
        # dequeues recover them; created now, so that message_due_ix has
        # them above the due mark, where the marks' invariant wants them)
        cur.execute("INSERT INTO lonnymq.message (channel, channel_id, position, dequeue_at, is_locked, num_attempts, "
                    "created_at, content) "
                    "SELECT 'q', lonnymq._channel_id('q'), "
                    "CASE WHEN g % 2 = 1 THEN (1000 + g::bigint) * 1048576 + (lonnymq._channel_id('q') & 1048575) END, "
                    "g, g % 2 = 0, g % 2, lonnymq.to_epoch(clock_timestamp()), 'x' FROM generate_series(1, 60000) AS g")
    with conn.cursor() as cur:
        calls(cur)
    collected = plans.take()
    touching = [p for p in collected if any(re.search(rf" on {t}\b", p) for t in TABLES)]
    assert len({query_text(p) for p in touching}) >= 12, "too few statements were explained"
    failures = {query_text(p): bad_nodes(p) + id_only_scans(p) for p in touching if bad_nodes(p) or id_only_scans(p)}
    assert not failures, "plans made on zero tuples that do not probe an index:\n" + "\n".join(
        f"{q}: {nodes}" for q, nodes in failures.items()
    ) + "\n\nplans:\n" + "\n".join(p for p in touching if bad_nodes(p) or id_only_scans(p))


ACTUAL_RE = re.compile(r"\(actual (?:time=\S+ )?rows=(\d+) loops=(\d+)\)")
REMOVED_RE = re.compile(r"Rows Removed by (?:Join )?Filter: (\d+)")


def rows_handled(plan: str) -> int:
    """Rows every node of an EXPLAIN ANALYZE plan produced or filtered out, over
    all its loops (EXPLAIN reports both per loop)."""
    total, loops = 0, 1
    for line in plan.splitlines():
        m = ACTUAL_RE.search(line)
        if m:
            loops = int(m.group(2))
            total += int(m.group(1)) * loops
            continue
        m = REMOVED_RE.search(line)
        if m:
            total += int(m.group(1)) * loops
    return total


@pytest.mark.parametrize("history", [False, True], ids=["plain", "retain_history"])
def test_batch_calls_handle_rows_in_proportion_to_the_batch(db, history):
    """A batch of n messages costs O(n) rows in every plan, not n x n.

    0.4.0's message_complete_batch joined the batch's (id, token) pairs to
    the messages with the pairs as the inner side of a nested loop, rescanned
    for each message: 10^6 rows for a batch of 1,000 (4.2 ms instead of
    0.56 ms for 100).  Index probes alone (what the other tests look at) do
    not show that.  Here auto_explain's EXPLAIN ANALYZE of every statement
    run by the batch calls counts the rows each node handled, over its loops,
    for batches of 1,000: a plan that compares every pair reaches 10^6."""
    n = 1000
    conn = db.connect()
    conn.autocommit = True
    # A queue with statistics, as any that has run a while (autovacuum
    # analyzes it): 50,000 future-dated messages in another channel.  (On a
    # never analyzed table the planner happened to pick the right order.)
    for _ in range(5):
        conn.execute("SELECT count(*) FROM lonnymq.message_create_batch('other', array_fill('o'::bytea, ARRAY[10000]), "
                     "array_fill(lonnymq.to_epoch(now() + interval '1 day'), ARRAY[10000]))")
    conn.execute("ANALYZE lonnymq.message")
    conn.execute("SELECT lonnymq.channel_set('b', p_retain_history => %s)", (history,))
    plans = PlanCollector(conn)
    conn.execute("SET auto_explain.log_analyze = on")
    conn.execute("SET auto_explain.log_timing = off")
    handled = {}
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM lonnymq.message_create_batch('b', array_fill('x'::bytea, ARRAY[%s]), "
                    "NULL, ARRAY(SELECT 'k' || g FROM generate_series(1, %s) AS g))", (n, n))
        assert cur.fetchone()[0] == n
        handled["create_batch"] = plans.take()
        cur.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, %s)", (n,))
        rows = cur.fetchall()
        assert len(rows) == n
        handled["dequeue"] = plans.take()
        cur.execute("SELECT lonnymq.message_complete_batch(%s, %s)", ([r[0] for r in rows], [r[1] for r in rows]))
        assert cur.fetchone()[0] == n
        handled["complete_batch"] = plans.take()
        if history:
            cur.execute("SELECT count(*) FROM lonnymq.message_history")
            assert cur.fetchone()[0] == n
    for call, collected in handled.items():
        assert collected, f"no plan of {call} was explained"
        worst = max(collected, key=rows_handled)
        assert rows_handled(worst) <= 20 * n, (
            f"{call}: one statement handled {rows_handled(worst)} rows for a batch of {n}:\n{worst}")


BUFFERS_RE = re.compile(r"Buffers: shared hit=(\d+)(?: read=(\d+))?")


def head_scan_buffers(plans: list[str]) -> int:
    """Buffers read by the batch dequeue's locking scan of message_ready_ix
    (the node's own line and the Buffers line under it)."""
    for plan in plans:
        lines = plan.splitlines()
        for i, line in enumerate(lines):
            if "Index Scan using message_ready_ix on message r" in line and "never executed" not in line:
                for below in lines[i + 1:i + 6]:
                    m = BUFFERS_RE.search(below)
                    if m:
                        return int(m.group(1)) + int(m.group(2) or 0)
    raise AssertionError("no batch head scan among the plans:\n" + "\n".join(plans))


def test_a_batch_dequeue_does_not_walk_the_consumed_head(db):
    """0.7.0: a FIFO's consumed head stays in the index the take reads until
    VACUUM, and a batch dequeue from its beginning stepped over every entry
    of it: a cost that grew with the time since the last VACUUM, a third of a
    batch's CPU at 8 clients.  It now starts at the position mark (0.11.0; a
    channel's floor before), which a raise moves to the bound of the epoch
    before: a batch steps over at most what the call before it took.
    20,000 messages consumed under a held snapshot (so that no scan can mark
    their entries dead): the next batch of 100 reads a few hundred index
    entries (its transaction's statistics) from the mark; with the mark set
    back to 0 (as 0.6.0 walked) the same dequeue reads the whole consumed
    head.  (Buffers would not show it: the consumed head's heap pages are
    read in order, one buffer access for many entries.)"""
    conn = db.connect()
    conn.autocommit = True
    conn.execute("ALTER TABLE lonnymq.message SET (autovacuum_enabled = false)")
    holder = db.connect()
    holder.autocommit = False
    holder.execute("SELECT txid_current()")
    read = ("SELECT sum(pg_stat_get_xact_tuples_returned(i.indexrelid))::bigint FROM pg_index AS i "
            "WHERE i.indrelid = 'lonnymq.message'::regclass")

    def cycle(n: int) -> tuple[int, int]:
        conn.execute("SELECT count(*) FROM lonnymq.message_create_batch('h', array_fill('x'::bytea, ARRAY[%s]))", (n,))
        with conn.transaction():
            before = conn.execute(read).fetchone()[0]
            rows = conn.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000, %s)", (n,)).fetchall()
            entries = conn.execute(read).fetchone()[0] - before
        conn.execute("SELECT lonnymq.message_complete_batch(%s::bigint[], %s::integer[])",
                     ([r[0] for r in rows], [r[1] for r in rows]))
        return len(rows), entries

    try:
        for _ in range(20):
            assert cycle(1000)[0] == 1000
        assert cycle(100)[0] == 100  # this batch raises the mark past the consumed head
        taken, from_mark = cycle(100)
        assert taken == 100
        conn.execute("SELECT setval('lonnymq.position_mark_seq', 0)")
        taken, from_zero = cycle(100)
        assert taken == 100
    finally:
        holder.rollback()
        holder.close()
    print(f"batch of 100: {from_mark} index entries from the mark, {from_zero} from the beginning")
    assert from_zero >= 20000, f"the fixture left no consumed head to walk ({from_zero} entries)"
    # Its own 100 turns, the 100 the call before it took (the mark lags one
    # raise), the 100 messages by primary key, and the probes of its turns.
    assert from_mark <= 500, f"the batch read {from_mark} index entries from the mark ({from_zero} from the beginning)"
