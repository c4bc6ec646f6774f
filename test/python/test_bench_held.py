"""The held-snapshot scenario of the benchmark (bench/held.py) still runs: one
channel, 10,000 channels and the plain table over a standing backlog, and one
channel near empty (consumers keeping up), 8 clients, a 2-second hold, against
the test cluster (as an external server: PGHOST/PGPORT).  Asserts that the
report has the section, a row and the targets of every variant, and the JSON
the figures (the snapshot was held by an xid, the probes read buffers, msg/s
was counted every second); never a throughput or buffer figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT

# key -> its title in the report (bench/scenarios.py, held_variants)
VARIANTS = {
    "held_1ch": "one channel, over a 10,000-message backlog",
    "held_10kch": "10,000 channels, over a 10,000-message backlog",
    "held_amo": "at-most-once plain table, over a 10,000-message backlog",
    "held_empty_1ch": "one channel, near-empty queue",
}


def test_held_snapshot_scenario_writes_its_figures(cluster, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "BENCH_"))}
    env.update(PGHOST=str(cluster.socket_dir), PGPORT=str(cluster.port), PGUSER=cluster.superuser)
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "run.py"),
         "--scenarios", ",".join(VARIANTS), "--warmup", "0.5", "--hold-before", "2", "--hold", "2",
         "--profile", "0", "--rounds", "0", "--out", str(tmp_path), "--name", "held"],
        env=env, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = (tmp_path / "held.md").read_text()
    assert "## Held snapshot" in report
    for key, title in VARIANTS.items():
        assert f"| {title} ({key}) |" in report, key
        if key != "held_amo":  # the targets: lonnymq's variants, not the plain table
            assert f"Held snapshot, {title}, 8 clients: buffers per dequeue" in report, key
            assert f"Held snapshot, {title}, 8 clients: msg/s, last" in report, key
    assert (tmp_path / "held-held.png").exists()

    data = json.loads((tmp_path / "held.json").read_text())
    runs = {h["variant"]: h for h in data["held"]["runs"]}
    assert set(runs) == set(VARIANTS)
    assert runs["held_10kch"]["backlog"] == 10_000 and runs["held_empty_1ch"]["backlog"] == 0
    for key, h in runs.items():
        assert not h["timeline_errors"], (key, h["timeline_errors"])
        assert h["holder"]["xid"] > 0 and h["holder"]["backend_xid"] == str(h["holder"]["xid"]), (key, h["holder"])
        assert h["t_hold_start"] < h["t_hold_end"] <= h["t_commit"], key
        phases = [p["phase"] for p in h["probes"]]
        assert "just before" in phases and phases[-1] == "end", (key, phases)
        assert h["buffers_before"] > 0 and h["buffers_end"] > 0, key
        assert h["rate_before"] > 0 and h["rate_end"] is not None, key
        # one count per second of warm-up + before + hold + the tail
        assert len(h["per_second"]) >= 4 + 2, (key, len(h["per_second"]))
