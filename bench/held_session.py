"""Held snapshot, seen from one worker session: the shared buffers of every
message_complete_dequeue call of ONE long-lived worker connection, and its
calls per second, before and during a held REPEATABLE READ snapshot.

    .venv/bin/python -m bench.held_session [--cases a,b,c] [--before 20] [--hold 60] [--window 10]
                                           [--name NAME] [--out DIR]

Why one session: a worker runs for hours on one connection, and every
statement inside lonnymq's PL/pgSQL functions runs there from a cached
generic plan (the entry points set plan_cache_mode = force_generic_plan).
bench/held.py samples one rolled-back dequeue of another connection every
10 s; this counts every call the worker makes (complete and take), in the
session whose plans were cached before the snapshot, so that the planning
of a fresh session can neither add to the figure nor hide a growth.

Cases (each from a fresh extension, its own worker, producer and holder
connections; the worker completes what its previous call delivered and takes
one, lock_ms 30,000):

  a  one channel, near empty: 10 standing messages, and a producer
     connection creates one message before every worker call (the worker
     keeps up);
  b  64 channels, one standing message each, the producer creating
     round-robin over them;
  c  due traffic: channel 'lim' with max_concurrency 2 (backoff 5 to 50 ms),
     fed by a schedule every 1 ms that the dequeues materialise; 1 delivery
     in 10 is failed with message_fail (a retry after the backoff), the
     others completed by the next call; no producer.

Timeline of a case: 100 warm-up calls (the session caches its plans), --before
seconds of normal running (the last --window of them measured: the window
"before"), then a holder connection runs bench/held.py's snapshot (BEGIN
ISOLATION LEVEL REPEATABLE READ, SELECT count(*) FROM pg_class, SELECT
txid_current(): an xid, so the xmin horizon stays back) and keeps it --hold
seconds, measured in windows of about --window seconds; then it rolls back.

Measures, per window: buffers per worker call = shared hit + read of the
top-level message_complete_dequeue statement in pg_stat_statements, whose
counts include every nested statement, divided by its calls (differences of
two reads, nothing is reset); calls per second of the worker; and each hold
window's growth factor against the window before.  The worker session runs
with pg_stat_statements.track = all and track_planning on, the producer and
the admin with track = top, so the nested rows are the worker's own (its
message_fail calls in c included): the report lists the top ones of the last
window, by buffers per worker call, against the same statement before the hold.
The targets (the issue's goals): buffers at the end of the hold <= 3x and calls
per second >= 0.7x of before; shown as met / not met, never asserted.

A private cluster (lonnymq_dev/pgcluster.py, pg_stat_statements preloaded
with track = all), or the server of PGHOST/PGPORT (database lonnymq_bench,
whose lonnymq is dropped and re-created for every case; pg_stat_statements
must be in its shared_preload_libraries, and the user a superuser).  Writes
bench/results/<name>.md and <name>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import psycopg

from bench.held import PROBE_LOCK_MS, SNAPSHOT_SQL
from bench.run import ROOT, Target, git_commit, log
from bench.scenarios import reset_lonnymq
from lonnymq_dev.calls import complete_dequeue

LOCK_MS = PROBE_LOCK_MS  # 30 s, as bench/held.py's probe and the reproduction
WARMUP_CALLS = 100
BUFFERS_TARGET = 3.0  # at most this many times the buffers per call of before
RATE_TARGET = 0.7  # at least this many times the calls per second of before
NESTED_TOP = 10  # nested statements kept per window
QUERY_CHARS = 300
WORKER_CALL = "FROM lonnymq.message_complete_dequeue("
FAIL_SQL = "SELECT lonnymq.message_fail(%s, %s, 'bench')"
# pg_stat_statements.track = all in the cluster (the brief of the private cluster);
# the sessions other than the worker's opt out of nested statements.
SETTINGS = {"pg_stat_statements.track": "all"}

PGSS = f"""
SELECT toplevel, queryid, calls, plans, shared_blks_hit + shared_blks_read, total_exec_time,
       regexp_replace(left(query, {QUERY_CHARS}), '\\s+', ' ', 'g')
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    setup: tuple[str, ...]
    produce: tuple[str, int] | None  # message_create's SQL, and over how many channels it goes round
    fail_share: float = 0.0  # of the deliveries, failed with message_fail instead of completed


CASES = {
    "a": Case("a", "one channel, near empty (a producer creates one message per worker call)",
              ("SELECT count(*) FROM lonnymq.message_create_batch('c0', array_fill('m'::bytea, ARRAY[10]))",),
              ("SELECT lonnymq.message_create(%s, 'm')", 1)),
    "b": Case("b", "64 channels, one standing message each (the producer creates round-robin)",
              ("SELECT count(*) FROM generate_series(0, 63) AS g, LATERAL lonnymq.message_create('c' || g, 'm')",),
              ("SELECT lonnymq.message_create(%s, 'm')", 64)),
    "c": Case("c", "due traffic: max_concurrency 2, a schedule every 1 ms, 1 delivery in 10 failed (retries)",
              ("SELECT lonnymq.channel_set('lim', p_max_concurrency => 2, p_backoff_base_ms => 5,"
               " p_backoff_max_ms => 50)",
               "SELECT lonnymq.schedule_set('tick', 'lim', 'p', 1)"),
              None, 0.1),
}


def pgss_read(conn) -> dict[tuple, tuple]:
    """pg_stat_statements of this database: (toplevel, queryid) -> (calls,
    plans, shared hit + read, total exec ms, query)."""
    return {(r[0], r[1]): r[2:] for r in conn.execute(PGSS).fetchall()}


def pgss_delta(before: dict, after: dict) -> dict[tuple, tuple]:
    """Per statement, what it did between two reads (statements that did nothing left out)."""
    out = {}
    for key, (calls, plans, blks, ms, query) in after.items():
        c0, p0, b0, m0, _ = before.get(key, (0, 0, 0, 0.0, ""))
        if calls < c0:  # evicted and re-entered in between: count it from zero
            c0, p0, b0, m0 = 0, 0, 0, 0.0
        if calls - c0 or plans - p0:
            out[key] = (calls - c0, plans - p0, blks - b0, ms - m0, query)
    return out


def ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


class Session:
    """One case: its worker, producer and admin connections, and the worker loop."""

    def __init__(self, dsn: str, case: Case, seed: int = 7) -> None:
        self.case = case
        self.dsn = dsn
        self.worker = psycopg.connect(dsn, autocommit=True)
        self.worker.execute("SET application_name = 'lonnymq-bench-worker'")
        self.worker.execute("SET pg_stat_statements.track = 'all'")
        self.worker.execute("SET pg_stat_statements.track_planning = on")
        self.admin = self._other("admin")
        self.producer = self._other("producer") if case.produce else None
        for stmt in case.setup:
            self.admin.execute(stmt)
        self.held: list[tuple] = []  # the previous call's deliveries, completed by the next
        self.rng = random.Random(seed)
        self.calls = self.delivered = self.fails = self.created = 0
        self.call_s = 0.0

    def _other(self, name: str):
        conn = psycopg.connect(self.dsn, autocommit=True)
        conn.execute(f"SET application_name = 'lonnymq-bench-{name}'")
        conn.execute("SET pg_stat_statements.track = 'top'")
        return conn

    def step(self) -> None:
        if self.producer is not None:
            sql, channels = self.case.produce
            self.producer.execute(sql, (f"c{self.calls % channels}",))
            self.created += 1
        t = time.perf_counter()
        rows = complete_dequeue(self.worker, self.held or None, LOCK_MS, 1)
        self.call_s += time.perf_counter() - t
        self.calls += 1
        self.delivered += len(rows)
        self.held = []
        for r in rows:
            if self.case.fail_share and self.rng.random() < self.case.fail_share:
                self.worker.execute(FAIL_SQL, r)
                self.fails += 1
            else:
                self.held.append(r)

    def run_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.step()

    def queue(self) -> list[int]:
        """Ready, scheduled and locked messages (the view channel_stats)."""
        row = self.admin.execute("SELECT coalesce(sum(ready), 0), coalesce(sum(scheduled), 0),"
                                 " coalesce(sum(locked), 0) FROM lonnymq.channel_stats").fetchone()
        return [int(x) for x in row]

    def window(self, label: str, phase: str, seconds: float, t_hold: float | None) -> dict:
        """Run the worker `seconds` and measure it (see the module docstring)."""
        s0 = pgss_read(self.admin)
        c0, d0, f0, t0 = self.calls, self.delivered, self.fails, self.call_s
        w0 = time.monotonic()
        self.run_for(seconds)
        wall = time.monotonic() - w0
        delta = pgss_delta(s0, pgss_read(self.admin))
        calls = self.calls - c0
        top = [v for (toplevel, _), v in delta.items() if toplevel and WORKER_CALL in v[4]
               and "pg_stat_statements" not in v[4]]
        top_calls = sum(v[0] for v in top)
        top_blks = sum(v[2] for v in top)
        nested = sorted(((qid, v) for (toplevel, qid), v in delta.items() if not toplevel),
                        key=lambda kv: -kv[1][2])
        return {
            "label": label, "phase": phase,
            "start_s": round(w0 - t_hold, 1) if t_hold is not None else None,
            "seconds": wall,
            "worker_calls": calls,
            "pgss_calls": top_calls,
            "buffers_per_call": top_blks / top_calls if top_calls else None,
            "plans_top": sum(v[1] for v in top),
            "calls_per_s": calls / wall,
            "deliveries_per_s": (self.delivered - d0) / wall,
            "delivered_per_call": (self.delivered - d0) / calls if calls else None,
            "ms_per_call": 1000 * (self.call_s - t0) / calls if calls else None,
            "fails": self.fails - f0,
            "queue_end": self.queue(),
            "nested_all": {str(qid): v[2] / calls for qid, v in nested} if calls else {},
            "nested": [{"queryid": str(qid), "runs_per_call": v[0] / calls, "buffers_per_call": v[2] / calls,
                        "plans": v[1], "ms_per_run": v[3] / v[0] if v[0] else None, "query": v[4]}
                       for qid, v in nested[:NESTED_TOP]] if calls else [],
        }

    def close(self) -> None:
        for conn in (self.worker, self.producer, self.admin):
            if conn is not None:
                conn.close()


def hold_windows(hold: float, window: float) -> list[float]:
    n = max(1, round(hold / window))
    return [hold / n] * n


def run_case(target: Target, case: Case, args) -> dict:
    with target.connect() as conn:
        reset_lonnymq(conn)
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'lonnymq'").fetchone()[0]
    s = Session(target.dsn, case)
    out: dict = {"key": case.key, "title": case.title, "lonnymq": version, "windows": [], "holder": {}}
    try:
        for _ in range(WARMUP_CALLS):
            s.step()
        before_w = min(args.window, args.before)
        s.run_for(args.before - before_w)
        out["windows"].append(s.window("before", "before", before_w, None))
        log(f"  {case.key}: before: {fmt_window(out['windows'][-1])}")
        with psycopg.connect(target.dsn, autocommit=True) as holder:
            holder.execute("SET application_name = 'lonnymq-bench-holder'")
            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            holder.execute(SNAPSHOT_SQL[0])
            t_hold = time.monotonic()
            out["holder"]["xid"] = int(holder.execute(SNAPSHOT_SQL[1]).fetchone()[0])
            try:
                start = 0.0
                for w in hold_windows(args.hold, args.window):
                    label = f"hold {start:.0f}-{start + w:.0f} s"
                    out["windows"].append(s.window(label, "hold", w, t_hold))
                    log(f"  {case.key}: {label}: {fmt_window(out['windows'][-1], out['windows'][0])}")
                    start += w
                out["holder"]["xmin_age_at_end"] = s.admin.execute(
                    "SELECT age(backend_xmin) FROM pg_stat_activity WHERE pid = %s",
                    (holder.info.backend_pid,)).fetchone()[0]
            finally:
                holder.execute("ROLLBACK")
                out["holder"]["held_s"] = time.monotonic() - t_hold
        out["worker_pid"] = s.worker.info.backend_pid  # one connection, from the warm-up to the end
        out["created"], out["fails"] = s.created, s.fails
    finally:
        s.close()
    judge(out)
    return out


def judge(out: dict) -> None:
    """Growth factors against before, and the targets on the last hold window."""
    wins = out["windows"]
    before = wins[0]
    for w in wins:
        w["buffers_x"] = ratio(w["buffers_per_call"], before["buffers_per_call"])
        w["calls_per_s_x"] = ratio(w["calls_per_s"], before["calls_per_s"])
    last_nested = wins[-1]["nested"]
    for n in last_nested:
        n["before_buffers_per_call"] = before["nested_all"].get(n["queryid"], 0.0)
    for w in wins:
        del w["nested_all"]  # every statement: only for the column above (the JSON keeps the top ones)
    hold = [w for w in wins if w["phase"] == "hold"]
    last = hold[-1] if hold else None
    bx = last["buffers_x"] if last else None
    rx = last["calls_per_s_x"] if last else None
    out["targets"] = {
        "buffers": {"window": last and last["label"], "ratio": bx, "limit": BUFFERS_TARGET,
                    "met": bx is not None and bx <= BUFFERS_TARGET,
                    "worst": max((w["buffers_x"] for w in hold if w["buffers_x"] is not None), default=None)},
        "calls_per_s": {"window": last and last["label"], "ratio": rx, "limit": RATE_TARGET,
                        "met": rx is not None and rx >= RATE_TARGET,
                        "worst": min((w["calls_per_s_x"] for w in hold if w["calls_per_s_x"] is not None),
                                     default=None)},
    }


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def _n(v: float | None, fmt: str = ",.1f") -> str:
    return "n/a" if v is None else format(v, fmt)


def fmt_window(w: dict, before: dict | None = None) -> str:
    text = (f"{_n(w['buffers_per_call'])} buffers/call, {w['calls_per_s']:,.0f} calls/s, "
            f"{_n(w['ms_per_call'], '.2f')} ms/call")
    if before is not None:
        text += (f" ({_x(ratio(w['buffers_per_call'], before['buffers_per_call']))} buffers, "
                 f"{_x(ratio(w['calls_per_s'], before['calls_per_s']))} calls/s)")
    return text


def _load(v) -> str:
    return " / ".join(f"{x:.2f}" for x in v) if v else "?"


def _met(t: dict) -> str:
    return "met" if t["met"] else "**not met**"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def report(data: dict) -> str:
    env, args = data["env"], data["args"]
    lines = [
        f"# Held snapshot in one worker session — {args['name']}\n",
        f"`{env['command']}`: {env['where']}; {env['postgres']}; lonnymq {env['lonnymq']}; "
        f"git {env['git']}; {env['cores']} cores, load average (1/5/15 min) {_load(env['load_start'])} at the "
        f"start, {_load(env.get('load_end'))} at the end; {env['started']} to {env.get('ended')}.\n",
        f"Each case: {WARMUP_CALLS} warm-up calls, {args['before']:g} s of normal running (the last "
        f"{min(args['window'], args['before']):g} s measured: \"before\"), then a REPEATABLE READ snapshot with an "
        f"xid held {args['hold']:g} s, measured in windows of about {args['window']:g} s. One worker connection "
        f"throughout, `message_complete_dequeue(previous delivery, lock_ms {LOCK_MS}, limit 1)`. Buffers per call: "
        "shared hit + read of the top-level call in `pg_stat_statements` (nested statements included) / its "
        "calls. Calls/s: the worker's calls (in a and b each follows one `message_create` of the producer, in the "
        "same loop). × before: the window against \"before\". See `bench/held_session.py`.\n",
        "## Targets\n",
        f"The issue's goals, on the last window of the hold: buffers per call at most {BUFFERS_TARGET:g}x, calls "
        f"per second at least {RATE_TARGET:g}x of before (worst: over every window of the hold).\n",
        "| case | buffers, end of hold | ≤ 3x | worst | calls/s, end of hold | ≥ 0.7x | worst |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in data["cases"].values():
        tb, tr = c["targets"]["buffers"], c["targets"]["calls_per_s"]
        lines.append(f"| {c['key']}: {c['title']} | {_x(tb['ratio'])} | {_met(tb)} | {_x(tb['worst'])} "
                     f"| {_x(tr['ratio'])} | {_met(tr)} | {_x(tr['worst'])} |")
    for c in data["cases"].values():
        lines += [
            f"\n## Case {c['key']}: {c['title']}\n",
            f"Holder's xid {c['holder'].get('xid')}, its xmin {c['holder'].get('xmin_age_at_end')} xids old at the "
            f"end; messages created by the producer {c['created']:,}, deliveries failed {c['fails']:,}.\n",
            "| window | worker calls | buffers / call | × before | calls/s | × before | delivered / call "
            "| ms / call | queue at the end: ready / scheduled / locked |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for w in c["windows"]:
            q = w["queue_end"]
            lines.append(
                f"| {w['label']} | {w['worker_calls']:,} | {_n(w['buffers_per_call'])} | {_x(w['buffers_x'])} "
                f"| {w['calls_per_s']:,.0f} | {_x(w['calls_per_s_x'])} | {_n(w['delivered_per_call'], '.2f')} "
                f"| {_n(w['ms_per_call'], '.2f')} | {q[0]:,} / {q[1]:,} / {q[2]:,} |")
        last = c["windows"][-1]
        lines += [
            f"\nWhere the buffers go in the last window ({last['label']}): the worker session's nested statements "
            "(its `message_fail` calls in c included), by buffers per worker call; \"before\": the same "
            "statement in the window before the hold; plans: how many times it was planned in the window "
            "(0: the cached plan). A statement that calls a function counts that function's statements too, "
            "so the rows overlap.\n",
            "| nested statement | runs / call | buffers / call | before | plans |",
            "|---|---|---|---|---|",
        ]
        for n in last["nested"]:
            lines.append(f"| `{_cell(n['query'][:160])}` | {n['runs_per_call']:.2f} | {n['buffers_per_call']:,.1f} "
                         f"| {n['before_buffers_per_call']:,.1f} | {n['plans']:,} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--cases", default="a,b,c", help="comma-separated, of a, b, c")
    p.add_argument("--before", type=float, default=20, help="seconds of normal running before the hold")
    p.add_argument("--hold", type=float, default=60, help="seconds the snapshot is held")
    p.add_argument("--window", type=float, default=10, help="seconds per measured window")
    p.add_argument("--name", default=datetime.now().strftime("%Y-%m-%d") + "-held-session")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args(argv)
    keys = [k.strip() for k in args.cases.split(",") if k.strip()]
    unknown = [k for k in keys if k not in CASES]
    if unknown or not keys:
        p.error(f"--cases: unknown {unknown or '(none)'}; the cases are {', '.join(CASES)}")
    if args.window <= 0 or args.before <= 0 or args.hold <= 0:
        p.error("--before, --hold and --window must be positive")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))  # stops the cluster, writes the report
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data: dict = {
        "args": vars(args),
        "env": {
            "command": ".venv/bin/python -m bench.held_session " + " ".join(sys.argv[1:] if argv is None else argv),
            "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "load_start": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count(), "git": git_commit(),
        },
        "targets": {"buffers_x_at_most": BUFFERS_TARGET, "calls_per_s_x_at_least": RATE_TARGET},
        "cases": {},
    }
    target = Target(SETTINGS)
    try:
        target.start()
        env = data["env"]
        env["where"] = target.where
        with target.connect() as conn:
            env["postgres"] = conn.execute("SELECT version()").fetchone()[0].split(",")[0]
            if "pg_stat_statements" not in conn.execute("SHOW shared_preload_libraries").fetchone()[0]:
                raise SystemExit(f"{target.where}: pg_stat_statements is not in shared_preload_libraries")
            env["lonnymq"] = conn.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'lonnymq'").fetchone()[0]
        for key in keys:
            log(f"case {key}: {CASES[key].title}")
            data["cases"][key] = run_case(target, CASES[key], args)
    finally:
        data["env"]["ended"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        data["env"]["load_end"] = [round(x, 2) for x in os.getloadavg()]
        target.stop()
        (out / f"{args.name}.json").write_text(json.dumps(data, indent=1))
        if data["cases"]:
            (out / f"{args.name}.md").write_text(report(data))
            log(f"wrote {out / args.name}.md and .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
