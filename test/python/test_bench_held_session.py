"""The held snapshot in one worker session (bench/held_session.py) still runs:
cases a, b and c, 3 s before and 6 s of hold in 3-second windows, on the
module's own private cluster (the test cluster does not preload
pg_stat_statements; PG* variables are removed so that it starts one).
Asserts that the report and the JSON have every case, its windows and its
targets, and that the figures are there and numbers; never a throughput or
buffer figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT

CASES = ("a", "b", "c")
WINDOWS = ["before", "hold 0-3 s", "hold 3-6 s"]


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def test_held_session_writes_its_figures(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "BENCH_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.held_session", "--cases", ",".join(CASES), "--before", "3", "--hold", "6",
         "--window", "3", "--out", str(tmp_path), "--name", "smoke"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=150,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = (tmp_path / "smoke.md").read_text()
    assert "## Targets" in report
    data = json.loads((tmp_path / "smoke.json").read_text())
    assert list(data["cases"]) == list(CASES)
    for key, case in data["cases"].items():
        assert f"\n## Case {key}: {case['title']}\n" in report, key
        assert f"| {key}: {case['title']} |" in report, key  # its row among the targets
        assert [w["label"] for w in case["windows"]] == WINDOWS, key
        for label in WINDOWS:
            assert f"| {label} |" in report, (key, label)
        assert case["holder"]["xid"] > 0 and _number(case["holder"]["xmin_age_at_end"]), (key, case["holder"])
        for w in case["windows"]:
            # every call of the one worker session is counted, in pg_stat_statements too
            assert w["worker_calls"] > 0 and w["pgss_calls"] == w["worker_calls"], (key, w["label"])
            for field in ("buffers_per_call", "calls_per_s", "deliveries_per_s", "ms_per_call",
                          "buffers_x", "calls_per_s_x"):
                assert _number(w[field]), (key, w["label"], field, w[field])
            assert len(w["queue_end"]) == 3 and all(_number(x) for x in w["queue_end"]), (key, w["label"])
        nested = case["windows"][-1]["nested"]
        assert nested, key  # track = all in the worker session: its nested statements are there
        for n in nested:
            assert n["query"] and _number(n["buffers_per_call"]) and _number(n["before_buffers_per_call"]), n
        for name, t in case["targets"].items():
            assert _number(t["ratio"]) and isinstance(t["met"], bool), (key, name, t)
            assert ("met" if t["met"] else "**not met**") in report
    assert "Where the buffers go in the last window (hold 3-6 s)" in report
