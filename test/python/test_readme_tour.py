"""README.md's five-minute tour, run as a user runs it from a fresh clone:
`make server` in one shell; in another, the line it printed, then every SQL
block of the tour in one psql session, the Python producer, and the Python
worker until it has taken what the tour left ready (then Ctrl-C, as the
README says).  The blocks are read from README.md itself, so the tour cannot
drift from what is tested."""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO_ROOT

TOUR = REPO_ROOT.joinpath("README.md").read_text().split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```", TOUR, re.M | re.S)


def _blocks(lang: str) -> list[str]:
    return [body for kind, body in BLOCKS if kind == lang]


class Lines:
    """A process's stdout, line by line, read by a thread (a select() on the
    pipe would miss lines already in the reader's buffer)."""

    def __init__(self, proc: subprocess.Popen):
        self.queue: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True)
        self.thread.start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.queue.put(line)
        self.queue.put(None)  # end of output

    def until(self, pattern: str, timeout: float) -> tuple[re.Match | None, str]:
        """Lines until one matches pattern (or timeout, or the end of output)."""
        seen = ""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self.queue.put(None)
                break
            seen += line
            m = re.search(pattern, line)
            if m:
                return m, seen
        return None, seen


@pytest.fixture
def server():
    """`make server`, as the tour says; Ctrl-C (SIGINT to its process group) at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG") or k == "PG_CONFIG"}
    proc = subprocess.Popen(["make", "--no-print-directory", "server"], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = Lines(proc)
    try:
        m, seen = lines.until(r"^export (PGHOST=.*)$", timeout=600)
        assert m, f"make server printed no export line:\n{seen}"
        client_env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        client_env.update(dict(kv.split("=", 1) for kv in shlex.split(m.group(1))))
        yield client_env
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
    m, seen = lines.until(r"stopped and removed", timeout=10)
    assert m, seen


def _psql(env: dict, sql: str) -> str:
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-c", sql], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_tour_runs_as_written(server):
    env = server
    sql = _blocks("sql")
    assert len(sql) == 5, "the tour's SQL blocks changed: update this test"
    proc = subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-f", "-"], input="\n".join(sql), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The workflow ran in its order: pack first, thanks last, once each.
    ran = re.findall(r"NOTICE:  done: (.*)", proc.stderr)
    assert ran[0] == "pack order 1001" and ran[-1] == "thank the customer", ran
    assert sorted(ran[1:3]) == ["invoice order 1001", "ship order 1001"], ran
    assert "waiting" in proc.stdout, "the last message of the workflow waited for the others"
    # What the SQL did: the order was worked and logged, the payment died and
    # was redriven, the reminder waits an hour, the report waits for tomorrow
    # (its schedule's pending occurrence, 0.15.0).
    assert _psql(env, "SELECT body FROM order_log") == '{"order": 1001}'
    assert _psql(env, "SELECT count(*) FROM lonnymq.dead_letter") == "0"
    assert _psql(env, "SELECT channel || ':' || (dequeue_at > lonnymq.to_epoch(now())) || ':' || (schedule IS NOT NULL)"
                      " FROM lonnymq.message ORDER BY channel") == "emails:true:false\npayments:false:false\nreports:true:true"
    assert _psql(env, "SELECT next_at > lonnymq.to_epoch(now()) FROM lonnymq.schedule") == "t"

    producer, worker = _blocks("python")
    subprocess.run([sys.executable, "-c", producer], env=env, check=True, timeout=60)
    assert _psql(env, "SELECT item FROM shop_order ORDER BY id") == "teapot\nkettle"

    proc = subprocess.Popen([sys.executable, "-u", "-c", worker], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = Lines(proc)
    try:
        done = []
        deadline = time.monotonic() + 60
        while len(done) < 2 and time.monotonic() < deadline:
            m, seen = lines.until(r"^(done|not completed): (.*)$", timeout=deadline - time.monotonic())
            assert m, f"the worker stopped printing:\n{seen}"
            done.append(m.group(0).rstrip("\n"))
        # Nothing else is ready: a while more shows no other message.
        m, seen = lines.until(r"^(done|not completed): ", timeout=3)
        assert m is None, f"the worker took what the tour did not leave ready: {seen}"
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        proc.wait(timeout=30)
    assert sorted(done) == sorted(["done: b'charge order 1001'", "done: b'{\"order\": 1002}'"]), done
    # Left: the reminder, and the report's pending occurrence.
    assert _psql(env, "SELECT channel FROM lonnymq.message ORDER BY channel") == "emails\nreports"
