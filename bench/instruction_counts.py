"""What one message of the worker loop costs the server, in instructions:
exact and repeatable to 0.1% in one backend, where a time A/B on this
shared machine moves by 3% from run to run (under clients the interleavings,
and the work they make, vary: a few percent).  valgrind (cachegrind, no cache simulation) counts
the instructions of the server's processes, in two runs of different
lengths from the same copy of the data directory; their difference divided
by the messages between them is the cost of a message, without start-up,
first-call compilation and shut-down.

- `single`: one backend, `postgres --single`, prepared statements (as
  pgbench -M prepared): message_create; message_complete_dequeue of the
  previous take, one channel, a backlog of 10,000 (the ids taken are known
  in advance: the backlog's, in order).
- `clients`: the whole server under valgrind (--trace-children), 8 pgbench
  clients running bench/pgbench_worker.py's worker loop; every process
  counted (backends, WAL writer, checkpointer).

Each version is the build (`build`) or an installed older one (`0.13.0`),
each in its own database.  Needs valgrind (Debian package `valgrind`) and
root (the server runs as the service user).  Not part of make test.

    .venv/bin/python -m bench.instruction_counts [--old 0.13.0] [--messages 100] [--clients-messages 100] [single clients]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from bench.pgbench_worker import BACKLOG, CLIENTS, SCRIPTS
from lonnymq_dev.pgcluster import Cluster

WARM = 30  # messages of the shorter run: caches, plans and compilation


def _total_instructions(files: list[str]) -> int:
    total = 0
    for path in files:
        with open(path) as f:
            for line in f:
                if line.startswith("summary:"):
                    total += int(line.split()[1])
    return total


def _service_user() -> list[str]:
    """The prefix that runs a command as the server's user (PostgreSQL refuses root)."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _as_service_user(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*_service_user(), *args], **kw)


def _copy_data(cluster: Cluster) -> Path:
    run = cluster.base_dir / "run"
    _as_service_user("rm", "-rf", str(run), check=True)
    _as_service_user("cp", "-a", str(cluster.data_dir), str(run), check=True)
    return run


def single(cluster: Cluster, db: str, first_id: int, messages: int, out: Path) -> float:
    """Instructions per message, one backend (postgres --single)."""
    counts = []
    for n in (WARM, WARM + messages):
        lines = ["PREPARE cr(text, bytea) AS SELECT lonnymq.message_create($1, $2)",
                 "PREPARE cd(bigint, integer) AS SELECT id, num_attempts FROM "
                 "lonnymq.message_complete_dequeue(ARRAY[$1]::bigint[], ARRAY[$2]::integer[], 60000)"]
        for i in range(n):
            lines += ["EXECUTE cr('bench', '\\x00')", f"EXECUTE cd({first_id + i - 1}, 1)"]
        run = _copy_data(cluster)
        file = out / f"single.{db}.{n}"
        p = _as_service_user("valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={file}",
                             str(cluster.bindir / "postgres"), "--single", "-D", str(run), "-c", "synchronous_commit=off", db,
                             input="\n".join(lines) + "\n", capture_output=True, text=True)
        if p.returncode != 0 or "ERROR" in p.stdout or f'id = "{first_id + n - 1}"' not in p.stdout:
            raise SystemExit(f"single-user run failed ({db}, {n}):\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
        counts.append(_total_instructions([str(file)]))
    return (counts[1] - counts[0]) / messages


def clients(cluster: Cluster, db: str, messages: int, out: Path) -> float:
    """Instructions per message, the whole server, CLIENTS pgbench clients."""
    script = out / "worker.sql"
    script.write_text(SCRIPTS["worker_1ch"])
    counts = []
    for per_client in (WARM // 3, WARM // 3 + messages):
        run = _copy_data(cluster)
        files = out / f"clients.{db}.{per_client}"
        files.mkdir(mode=0o777)
        os.chmod(files, 0o777)
        server = subprocess.Popen(
            [*_service_user(), "valgrind", "--tool=cachegrind", "--cache-sim=no", "--trace-children=yes",
             f"--cachegrind-out-file={files}/cg.%p", str(cluster.bindir / "postgres"), "-D", str(run),
             "-c", f"port={cluster.port}", "-c", f"unix_socket_directories={cluster.socket_dir}",
             "-c", "listen_addresses="],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(1200):
            if subprocess.run(["pg_isready", "-q", "-h", str(cluster.socket_dir), "-p", str(cluster.port)]).returncode == 0:
                break
            time.sleep(0.25)
        p = subprocess.run(["pgbench", "-n", "-M", "prepared", "-c", str(CLIENTS), "-j", "2", "-t", str(per_client),
                            "-D", "id=0", "-D", "num_attempts=0", "-f", str(script),
                            "-h", str(cluster.socket_dir), "-p", str(cluster.port), "-U", cluster.superuser, db],
                           capture_output=True, text=True, env={**os.environ, "PGOPTIONS": "-c synchronous_commit=off"})
        _as_service_user(str(cluster.bindir / "pg_ctl"), "-D", str(run), "stop", "-m", "fast", "-w",
                         capture_output=True)
        server.wait()
        if p.returncode != 0:
            raise SystemExit(f"pgbench failed ({db}):\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
        counts.append(_total_instructions(glob.glob(f"{files}/cg.*")))
    return (counts[1] - counts[0]) / (CLIENTS * messages)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", default="0.13.0", help="the installed older version to count beside the build")
    p.add_argument("--messages", type=int, default=100, help="single: messages counted")
    p.add_argument("--clients-messages", type=int, default=100, help="clients: messages counted per client")
    p.add_argument("modes", nargs="*", default=["single", "clients"])
    args = p.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind not found (apt-get install valgrind)")
    versions = {"old": args.old, "build": None}
    with Cluster(settings={"synchronous_commit": "off", "autovacuum": "off", "fsync": "off"}) as cluster:
        first_ids = {}
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            for db in versions:
                admin.execute(f"CREATE DATABASE {db} TEMPLATE template0")
        for db, version in versions.items():
            with psycopg.connect(cluster.dsn(db), autocommit=True) as conn:
                conn.execute(f"CREATE EXTENSION lonnymq VERSION '{version}'" if version else "CREATE EXTENSION lonnymq")
                conn.execute("SELECT count(*) FROM lonnymq.message_create_batch('bench', "
                             "array_fill('\\x00'::bytea, ARRAY[%s]))", (BACKLOG,))
                conn.execute("VACUUM ANALYZE")
                first_ids[db] = conn.execute("SELECT min(id) FROM lonnymq.message").fetchone()[0]
        cluster.stop()
        out = Path(tempfile.mkdtemp(prefix="lonnymq-instructions-"))
        os.chmod(out, 0o777)
        try:
            rows = []
            for mode in args.modes:
                got = {db: (single(cluster, db, first_ids[db], args.messages, out) if mode == "single"
                            else clients(cluster, db, args.clients_messages, out)) for db in versions}
                rows.append((mode, got["old"], got["build"]))
        finally:
            shutil.rmtree(out, ignore_errors=True)
    print(f"\ninstructions per worker-loop message (thousands), lonnymq {args.old} and the build")
    print(f"| mode | {args.old} | build | {args.old} / build |")
    print("|---|---|---|---|")
    for mode, old, build in rows:
        print(f"| {mode} | {old / 1000:,.1f} | {build / 1000:,.1f} | {old / build:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
