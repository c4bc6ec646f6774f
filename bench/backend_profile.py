"""Profiling helpers: pg_stat_statements, pg_stat_user_functions, wait-event
sampling and EXPLAIN (ANALYZE, BUFFERS) of every nested statement (auto_explain).

All of it is optional: on a server without pg_stat_statements in
shared_preload_libraries, or as a non-superuser, the parts that cannot run are
reported as unavailable.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter

import psycopg

# Session settings of the clients during a profiled run (superuser-only GUCs;
# ignored when refused).
PROFILE_SESSION_SQL = (
    "SET pg_stat_statements.track = 'all'",
    "SET track_functions = 'pl'",
)


def has_pgss(conn) -> bool:
    row = conn.execute(
        "SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements'"
    ).fetchone()
    if not row[0]:
        return False
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return True
    except psycopg.Error:
        return False


def reset_stats(conn, pgss: bool) -> None:
    if pgss:
        conn.execute("SELECT pg_stat_statements_reset()")
    try:
        conn.execute("SELECT pg_stat_reset()")  # per-database counters incl. functions
    except psycopg.Error:
        pass


def classify(query: str) -> str | None:
    q = query.lower()
    if "complete_dequeue(" in q:  # the worker's call: its completes and its delivery
        return "dequeue"
    if "message_create" in q:
        return "create"
    if "message_dequeue" in q:
        return "dequeue"
    if "message_complete" in q:
        return "complete"
    if "bench_floor." in q:  # the floor's three functions
        for kind in ("create", "dequeue", "complete"):
            if f"bench_floor.{kind}(" in q:
                return kind
        return None
    if "bench_queue" in q:
        if q.startswith("insert"):
            return "create"
        if q.startswith("delete") and "skip locked" in q:
            return "dequeue"  # at-most-once: dequeue and complete in one statement
        if q.startswith("select") and "skip locked" in q:
            return "dequeue"
        if q.startswith("delete"):
            return "complete"
    return None


def server_call_times(conn, pgss: bool) -> dict:
    """Top-level statements of this run by call type: calls and mean ms (server side)."""
    if not pgss:
        return {}
    rows = conn.execute(
        """
        SELECT query, calls, total_exec_time
        FROM pg_stat_statements
        WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        """
    ).fetchall()
    out: dict[str, dict] = {}
    for query, calls, total in rows:
        kind = classify(query)
        if kind is None or not calls:
            continue
        d = out.setdefault(kind, {"calls": 0, "total_ms": 0.0})
        d["calls"] += calls
        d["total_ms"] += total
    for d in out.values():
        d["mean_ms"] = d["total_ms"] / d["calls"]
    return out


def table_stats(conn, baseline: bool) -> dict:
    where = ("(relname = 'bench_queue' AND schemaname = current_schema() OR schemaname = 'bench_floor')"
             if baseline else "schemaname = 'lonnymq'")
    rows = conn.execute(
        f"""
        SELECT relname, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd,
               pg_total_relation_size(relid), autovacuum_count
        FROM pg_stat_user_tables WHERE {where} ORDER BY relname
        """
    ).fetchall()
    tables = {
        r[0]: {"live": r[1], "dead": r[2], "upd": r[3], "hot_upd": r[4], "bytes": r[5], "autovacuums": r[6]}
        for r in rows
    }
    return {
        "dead": sum(t["dead"] for t in tables.values()),
        "live": sum(t["live"] for t in tables.values()),
        "bytes": sum(t["bytes"] for t in tables.values()),
        "tables": tables,
    }


def statement_profile(conn, limit: int = 25) -> list[dict]:
    """pg_stat_statements (track = all) of the run: every statement, nested ones too."""
    rows = conn.execute(
        """
        SELECT query, toplevel, calls, total_exec_time, mean_exec_time, rows,
               shared_blks_hit, shared_blks_read, shared_blks_dirtied, wal_records
        FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND calls > 0
        ORDER BY total_exec_time DESC
        LIMIT %s
        """,
        (limit,),
    ).fetchall()
    out = []
    for q, top, calls, total, mean, nrows, hit, read, dirtied, wal in rows:
        out.append({
            "query": re.sub(r"\s+", " ", q).strip(),
            "toplevel": top,
            "calls": calls,
            "total_ms": total,
            "mean_ms": mean,
            "rows_per_call": nrows / calls,
            "blks_hit_per_call": hit / calls,
            "blks_read_per_call": read / calls,
            "blks_dirtied_per_call": dirtied / calls,
            "wal_per_call": wal / calls,
        })
    return out


def function_profile(conn) -> list[dict]:
    rows = conn.execute(
        """
        SELECT schemaname || '.' || funcname, calls, total_time, self_time
        FROM pg_stat_user_functions
        WHERE calls > 0
        ORDER BY self_time DESC
        """
    ).fetchall()
    return [
        {"function": f, "calls": c, "total_ms": t, "self_ms": s, "self_mean_ms": s / c}
        for f, c, t, s in rows
    ]


class WaitSampler:
    """Samples pg_stat_activity of the benchmark clients every `interval` seconds."""

    def __init__(self, dsn: str, interval: float = 0.01) -> None:
        self.dsn = dsn
        self.interval = interval
        self.counts: Counter = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "WaitSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                while not self._stop.is_set():
                    rows = conn.execute(
                        """
                        SELECT CASE WHEN state <> 'active' THEN 'Client'
                                    ELSE coalesce(wait_event_type, 'CPU') END,
                               CASE WHEN state <> 'active' THEN coalesce(state, '?') || ' (waiting for the client)'
                                    ELSE coalesce(wait_event, 'running') END
                        FROM pg_stat_activity
                        WHERE application_name = 'lonnymq-bench' AND pid <> pg_backend_pid()
                        """
                    ).fetchall()
                    for r in rows:
                        self.counts[(r[0], r[1])] += 1
                    self.samples += 1
                    time.sleep(self.interval)
        except psycopg.Error:
            pass

    def table(self) -> list[dict]:
        total = sum(self.counts.values()) or 1
        return [
            {"type": t, "event": e, "share": n / total, "samples": n}
            for (t, e), n in self.counts.most_common()
        ]


def explain_calls(dsn: str, label: str, calls: list[tuple[str, tuple]]) -> str:
    """Run each (sql, params) once with auto_explain logging ANALYZE + BUFFERS of every
    nested statement to this client; return the plans as text."""
    lines: list[str] = []
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            notices: list[str] = []
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            conn.execute("LOAD 'auto_explain'")
            for stmt in (
                "SET auto_explain.log_min_duration = 0",
                "SET auto_explain.log_analyze = on",
                "SET auto_explain.log_buffers = on",
                "SET auto_explain.log_timing = on",
                "SET auto_explain.log_nested_statements = on",
                "SET auto_explain.log_level = 'notice'",
            ):
                conn.execute(stmt)
            results: list = []
            for sql, params in calls:
                notices.clear()
                if callable(params):
                    params = params(results)
                cur = conn.execute(sql, params)
                try:
                    results.append(cur.fetchall())
                except psycopg.ProgrammingError:
                    results.append([])
                lines.append(f"### {label}: `{_squash(sql % tuple(repr(p) for p in params))}`\n")
                lines.append("```")
                for n in notices:
                    lines.append(n.rstrip())
                    lines.append("")
                lines.append("```\n")
    except psycopg.Error as exc:
        lines.append(f"(auto_explain not available: {exc})\n")
    return "\n".join(lines)


def _squash(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()
