"""The benchmark harness (bench/run.py) still runs: one scenario and the
at-most-once baseline, 2 clients, ~2 s each, against the test cluster (as an
external server: PGHOST/PGPORT).  Asserts only that the report is written and
holds the scenario rows; never a throughput figure."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO_ROOT


def test_bench_harness_writes_a_report(cluster, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "BENCH_"))}
    env.update(PGHOST=str(cluster.socket_dir), PGPORT=str(cluster.port), PGUSER=cluster.superuser)
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "run.py"),
         "--scenarios", "lifecycle_1ch,baseline_amo", "--clients", "2",
         "--duration", "1.5", "--warmup", "0.5", "--profile", "0", "--no-plots",
         "--out", str(tmp_path), "--name", "smoke"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = (tmp_path / "smoke.md").read_text()
    assert (tmp_path / "smoke.json").exists()
    assert "| one channel | 2 |" in report
    assert "| at-most-once: DELETE" in report
    assert "## Targets" in report
