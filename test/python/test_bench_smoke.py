"""The benchmark harness (bench/run.py) still runs: the lifecycle and the
worker loop, the at-most-once baseline and both floors, 2 clients, ~2 s each, against the test
cluster (as an external server: PGHOST/PGPORT).  Asserts that the report is
written, holds the scenario rows and the CPU shares; never a throughput
figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT


def test_bench_harness_writes_a_report(cluster, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "BENCH_"))}
    env.update(PGHOST=str(cluster.socket_dir), PGPORT=str(cluster.port), PGUSER=cluster.superuser)
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "run.py"),
         "--scenarios", "lifecycle_1ch,worker_1ch,baseline_amo,baseline_floor,baseline_floor_worker", "--clients", "2",
         "--duration", "1.5", "--warmup", "0.5", "--profile", "0", "--no-plots",
         "--out", str(tmp_path), "--name", "smoke"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = (tmp_path / "smoke.md").read_text()
    assert (tmp_path / "smoke.json").exists()
    assert "| one channel | 2 |" in report
    assert "| worker loop, one channel | 2 |" in report
    assert "| at-most-once: DELETE" in report
    assert "## Targets" in report

    assert "## Where the CPU goes (2 clients, synchronous_commit on)" in report
    data = json.loads((tmp_path / "smoke.json").read_text())
    runs = {r["variant"]: r for r in data["runs"]}
    assert runs["worker_1ch"]["consumed"] > 0 and runs["worker_1ch"]["errors"] == 0
    for key in ("lifecycle_1ch", "worker_1ch", "baseline_amo", "baseline_floor", "baseline_floor_worker"):
        cpu = runs[key]["cpu_per_msg"]
        # the cluster runs on this machine: every share can be read
        assert cpu["client_us"] > 0 and cpu["backend_us"] > 0 and cpu["total_us"] > 0, (key, cpu)
        assert 0 < cpu["cores_busy"] <= data["env"]["cores"] + 0.5, (key, cpu)


def test_server_times_are_classified_for_every_variant():
    """The report's per-call server times come from pg_stat_statements, matched to
    create / dequeue / complete by their SQL: the floor's calls must match too
    (before, its columns silently fell back to the client's round trips).  The
    SQL is what each step of the clients' loops sends (lonnymq's dequeue and
    completes come from lonnymq_dev.calls), recorded by a stand-in cursor."""
    from bench import clients as c
    from bench.backend_profile import classify
    from lonnymq_dev import calls

    class Recorder:  # a cursor that keeps the SQL and returns empty results
        def __init__(self):
            self.sent = []

        def execute(self, sql, params=()):
            self.sent.append(sql)
            return self

        def fetchall(self):
            return []

        def fetchone(self):
            return (0,)

    def sent(step, *args):
        cur = Recorder()
        step(cur, *args)
        assert len(cur.sent) == 1, cur.sent
        return cur.sent[0].replace("%s", "$1")  # as pg_stat_statements shows it: parameters as $n

    expected = [
        (sent(c.create_one, "ch"), "create"), (sent(c.create_batch, "ch", 2), "create"),
        (sent(c.dequeue, 1), "dequeue"), (sent(calls.complete, 1, 1), "complete"),
        (sent(calls.complete_batch, [(1, 1)]), "complete"), (sent(c.complete_dequeue, [(1, 1)], 1), "dequeue"),
        (sent(c.floor_create, "ch"), "create"), (sent(c.floor_dequeue, 1), "dequeue"),
        (sent(c.floor_complete, 1, 1), "complete"), (sent(c.floor_complete_dequeue, [(1, 1)], 1), "dequeue"),
        (c.SQL_BASE_INSERT, "create"), (c.SQL_BASE_AMO, "dequeue"), (c.SQL_BASE_LOCK, "dequeue"),
        (c.SQL_BASE_DELETE, "complete"),
    ]
    for sql, kind in expected:
        assert classify(sql) == kind, sql
