"""The held-snapshot scenario (6): a REPEATABLE READ transaction left open while
8 clients churn a queue with a standing backlog.

An old snapshot keeps VACUUM, HOT pruning and index-entry killing from removing
any row version that died after it, so a dequeue's index scans walk the
versions of every message consumed since.  Each variant's timeline (seconds
from the moment the clients start):

    warm-up | T_before of normal running | snapshot held for T_hold | commit, a short tail

`HeldTimeline` is the observer `run_clients` starts next to the clients (in
this process, as two threads):

- every second it reads the clients' shared progress counters (messages
  consumed so far), which gives msg/s per second without touching the loops;
- a holder connection runs `BEGIN ISOLATION LEVEL REPEATABLE READ`,
  `SELECT count(*) FROM pg_class` (the snapshot) and `SELECT txid_current()`
  (an xid, so it holds the xmin horizon back as a writing transaction, a
  pg_dump or a replica's feedback would), holds it, and commits;
- a probe connection runs every PROBE_EVERY_S, just before the snapshot and
  at the end of the hold, in a transaction it rolls back, `EXPLAIN (ANALYZE,
  BUFFERS, FORMAT JSON)` of one dequeue as the clients call it, and keeps the
  top plan node's shared hit + read buffers.  For lonnymq that node is the
  Function Scan of message_dequeue, whose buffers include those of every
  statement the PL/pgSQL function runs (checked against pg_stat_statements
  with track = all: equal, once the session has the function cached; the
  probe therefore runs one discarded probe first).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import psycopg

from bench.clients import SQL_BASE_AMO
from bench.backend_profile import table_stats

HELD_CLIENTS = 8  # fixed: the figures are for 8 clients, and a run is minutes long
PROBE_EVERY_S = 10.0
RATE_WINDOW_S = 30.0  # msg/s is compared over the last this-many seconds before and of the hold
TAIL_S = 5.0  # the clients run on after the hold's end, so the final probe runs under load
PROBE_LOCK_MS = 30_000
SNAPSHOT_SQL = ("SELECT count(*) FROM pg_class", "SELECT txid_current()")


def probe_sql(baseline: bool, limit: int) -> str:
    """One dequeue as the clients do it, under EXPLAIN (ANALYZE, BUFFERS)."""
    explain = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
    if baseline:
        return explain + SQL_BASE_AMO
    return explain + f"SELECT * FROM lonnymq.message_dequeue({PROBE_LOCK_MS}, {limit})"


class HeldTimeline:
    """The held snapshot, the buffer probes and the per-second counts of one run
    (see the module docstring); `start` when the clients start, `stop` after."""

    def __init__(self, dsn: str, probe: str, warmup: float, before: float, hold: float,
                 baseline: bool, log: Callable[[str], None] = print) -> None:
        self.dsn = dsn
        self.probe = probe
        self.warmup = warmup
        self.before = before
        self.hold = hold
        self.baseline = baseline
        self.log = log
        self.samples: list[tuple[float, int]] = []  # (seconds since t0, messages consumed so far)
        self.probes: list[dict] = []
        self.holder: dict = {"sql": list(SNAPSHOT_SQL)}
        self.t_hold_start: float | None = None
        self.t_hold_end: float | None = None
        self.t_commit: float | None = None
        self.tables_end: dict | None = None
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._holder_conn = None

    # ---- lifecycle

    def start(self, t0: float, progress) -> "HeldTimeline":
        self.t0 = t0
        self._progress = progress
        self._threads = [threading.Thread(target=self._sample, daemon=True),
                         threading.Thread(target=self._timeline, daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        """Wait for the timeline (its last probe and the commit), then stop the
        sampler.  Idempotent; never leaves the snapshot open."""
        if self._threads:
            self._threads[1].join(timeout=300)
            self._stop.set()
            for t in self._threads:
                t.join(timeout=10)
            self._threads = []
        self._stop.set()
        if self._holder_conn is not None:  # the timeline failed or timed out
            try:
                self._holder_conn.close()
            except psycopg.Error:
                pass
            self._holder_conn = None

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _sleep_until(self, t: float) -> bool:
        """False when stopped first."""
        return not self._stop.wait(max(0.0, t - self._now()))

    # ---- threads

    def _sample(self) -> None:
        k = 0
        while True:
            self.samples.append((self._now(), sum(self._progress)))
            k += 1
            if not self._sleep_until(k):
                self.samples.append((self._now(), sum(self._progress)))
                return

    def _timeline(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as probe_conn:
                probe_conn.execute("SET application_name = 'lonnymq-bench-probe'")
                self._probe(probe_conn, "discarded")  # caches the function and its plans
                self.probes.clear()
                hold_at = self.warmup + self.before
                t = self.warmup
                while t < hold_at - 1.0:
                    if not self._sleep_until(t):
                        return
                    self._probe(probe_conn, "before")
                    t += PROBE_EVERY_S
                if not self._sleep_until(hold_at):
                    return
                p = self._probe(probe_conn, "just before")
                self._take_snapshot()
                self.log(f"      snapshot taken at {self.t_hold_start:.1f} s (xid {self.holder.get('xid')}); "
                         f"{p['buffers']:,} buffers per dequeue just before")
                end_at = self.t_hold_start + self.hold
                t = self.t_hold_start + PROBE_EVERY_S
                while t < end_at - 1.0:
                    if not self._sleep_until(t):
                        return
                    p = self._probe(probe_conn, "hold")
                    if len(self.probes) % 3 == 0:
                        self.log(f"      {p['t'] - self.t_hold_start:5.0f} s into the hold: "
                                 f"{p['buffers']:,} buffers per dequeue")
                    t += PROBE_EVERY_S
                if not self._sleep_until(end_at):
                    return
                self.t_hold_end = self._now()
                p = self._probe(probe_conn, "end")
                self.holder["xmin_age_at_end"] = probe_conn.execute(
                    "SELECT age(backend_xmin) FROM pg_stat_activity WHERE pid = %s",
                    (self.holder["pid"],)).fetchone()[0]
                self.tables_end = table_stats(probe_conn, self.baseline)
                self._holder_conn.execute("COMMIT")
                self.t_commit = self._now()
                self.log(f"      committed at {self.t_commit:.1f} s; {p['buffers']:,} buffers per dequeue "
                         f"at the end of the hold; holder's xmin {self.holder['xmin_age_at_end']:,} xids old")
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            self.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            self.log(f"      held timeline failed: {self.errors[-1]}")
        finally:
            if self._holder_conn is not None:
                self._holder_conn.close()
                self._holder_conn = None

    def _take_snapshot(self) -> None:
        conn = psycopg.connect(self.dsn, autocommit=True)
        self._holder_conn = conn
        conn.execute("SET application_name = 'lonnymq-bench-holder'")
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute(SNAPSHOT_SQL[0])
        self.t_hold_start = self._now()
        self.holder["xid"] = int(conn.execute(SNAPSHOT_SQL[1]).fetchone()[0])
        pid = conn.info.backend_pid
        self.holder["pid"] = pid
        xid, xmin = conn.execute(
            "SELECT backend_xid::text, backend_xmin::text FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        self.holder["backend_xid"], self.holder["backend_xmin"] = xid, xmin

    def _probe(self, conn, phase: str) -> dict:
        t = self._now()
        with conn.transaction(force_rollback=True):  # the dequeue is undone
            plan = conn.execute(self.probe).fetchone()[0][0]
        top = plan["Plan"]
        p = {
            "t": t,
            "phase": phase,
            "hit": top["Shared Hit Blocks"],
            "read": top["Shared Read Blocks"],
            "buffers": top["Shared Hit Blocks"] + top["Shared Read Blocks"],
            "rows": top.get("Actual Rows"),
            "ms": plan.get("Execution Time"),
        }
        self.probes.append(p)
        return p

    # ---- figures

    def count_at(self, t: float) -> float:
        """Messages consumed by time t (linear between the per-second samples)."""
        s = self.samples
        if not s:
            return 0.0
        if t <= s[0][0]:
            return float(s[0][1])
        for (ta, ca), (tb, cb) in zip(s, s[1:]):
            if ta <= t <= tb:
                return ca + (cb - ca) * ((t - ta) / (tb - ta) if tb > ta else 1.0)
        return float(s[-1][1])

    def rate(self, a: float, b: float) -> float | None:
        return (self.count_at(b) - self.count_at(a)) / (b - a) if b > a else None

    def result(self) -> dict:
        """The run's figures (JSON-ready): msg/s over the RATE_WINDOW_S before the
        hold and the last RATE_WINDOW_S of it, buffers per dequeue just before and
        at the end, their ratios, every probe and msg/s for every second."""
        last = int(self.samples[-1][0]) if self.samples else 0
        out: dict = {
            "warmup_s": self.warmup, "before_s": self.before, "hold_s": self.hold,
            "t_hold_start": self.t_hold_start, "t_hold_end": self.t_hold_end, "t_commit": self.t_commit,
            "per_second": [self.count_at(i + 1) - self.count_at(i) for i in range(last)],
            "probes": self.probes, "holder": self.holder, "tables_end": self.tables_end,
            "timeline_errors": self.errors,
            "rate_before": None, "rate_end": None, "rate_ratio": None, "windows": None,
            "window_before_s": None, "window_end_s": None,
            "buffers_before": None, "buffers_end": None, "buffers_ratio": None,
        }
        if self.t_hold_start is None or self.t_hold_end is None:
            return out
        w_before = (self.t_hold_start - min(RATE_WINDOW_S, self.before), self.t_hold_start)
        w_end = (self.t_hold_end - min(RATE_WINDOW_S, self.hold), self.t_hold_end)
        rb, re_ = self.rate(*w_before), self.rate(*w_end)
        out.update(rate_before=rb, rate_end=re_, rate_ratio=re_ / rb if rb and re_ is not None else None,
                   windows=[list(w_before), list(w_end)],
                   window_before_s=w_before[1] - w_before[0], window_end_s=w_end[1] - w_end[0])
        bb = next((p["buffers"] for p in self.probes if p["phase"] == "just before"), None)
        be = next((p["buffers"] for p in self.probes if p["phase"] == "end"), None)
        out.update(buffers_before=bb, buffers_end=be,
                   buffers_ratio=be / bb if bb and be is not None else None)
        return out
