"""The pipeline's enqueue on a real Spark standalone cluster, and a worker killed mid-job.

The cluster (lonnymq_dev.spark_cluster): a master and two workers, separate
JVMs on 127.0.0.1, one core each; every application gets one executor on each
worker, and the driver runs in this process (or in the CLI's). Executors run a
bare Python: the interpreter under the venv, with the venv's site-packages on
PYTHONPATH (pyspark, psycopg) but not this repository or its editable install,
as on a machine that has never seen the repository, so the pipeline must ship
whatever it imports.

Determinism (no sleeps, no lucky timing): a *write gate*, one transaction of
the test's holding ``LOCK TABLE lonnymq.message IN SHARE MODE``. Every write
task then blocks at its first message insert, inside its open transaction,
until the gate opens. With both tasks of the first wave blocked, the test
finds which worker each one runs on (the TCP connection's client end belongs
to a process under that worker), and only then kills a worker, so the kill
always hits a write task in flight:
    before its commit: the lost task is rerun on the surviving worker;
    after its commit: the victim's executor JVM is frozen (SIGSTOP) before the
        gate opens, so its Python worker commits but the task's result never
        reaches the driver; the worker is killed once the commit is visible,
        and the rerun must find every key already there.
Each case then checks every row is exactly one message.

Spark's own settings for the retries: spark.task.maxFailures = 4 (a lost
executor's task counts as a failure when the driver sees the connection drop
first); the master spreads an application's executors over the workers
(spark.deploy.spreadOut, set by the cluster); no speculation (the default), so
only the lost task is ever run twice.

Wall time of the module: 70 to 100 s on 2 busy cores, mostly JVM start-ups (the
cluster, an application per test, the CLI's driver); marked slow. Needs pyspark
with pyarrow (the dev extra), Linux (/proc) and a Java 17+ runtime.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from lonnymq_dev.spark_cluster import SparkStandaloneCluster
from pipeline import EnqueueSpec, enqueue, get_spark
from pipeline.common import Progress

pytestmark = pytest.mark.slow

PARTITIONS = 6
ROWS_PER_PARTITION = 10
ROWS = PARTITIONS * ROWS_PER_PARTITION
# Keys derived from the rows. A task reads its whole partition before it sends its
# first batch (each channel's rows fit in one): so when it waits at the gate, its
# Python worker needs nothing more from the executor JVM to commit, even frozen.
SPEC = EnqueueSpec(channel_col="channel")
assert ROWS_PER_PARTITION <= SPEC.batch_size
VICTIM = 0  # the worker killed
JOB_TIMEOUT = 180  # seconds: generous, the machine is shared

# Retries on a cluster: a task lost with its executor is rerun elsewhere.
RETRY_CONF = {"spark.task.maxFailures": "4"}

# A Python for the executors that has pyspark and psycopg but not the repository.
BARE_PYTHON = str(Path(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}"))
SITE_PACKAGES = sysconfig.get_path("purelib")
BARE_PYTHON_CONF = {"spark.executorEnv.PYTHONPATH": SITE_PACKAGES}


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def bare_python() -> str:
    """The executors' interpreter, checked to know pyspark and psycopg but not our packages."""
    if not Path(BARE_PYTHON).exists():
        pytest.fail(f"no {BARE_PYTHON}: the interpreter the venv was made from is needed", pytrace=False)
    probe = ("import importlib.util as u, json; "
             "print(json.dumps({m: u.find_spec(m) is not None for m in "
             "('pyspark', 'psycopg', 'pipeline', 'lonnymq_dev')}))")
    proc = subprocess.run([BARE_PYTHON, "-c", probe], env={"PYTHONPATH": SITE_PACKAGES, "PATH": os.defpath},
                          cwd="/", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"pyspark": True, "psycopg": True, "pipeline": False, "lonnymq_dev": False}
    return BARE_PYTHON


@pytest.fixture(scope="module")
def standalone_cluster():
    keep = os.environ.get("LONNYMQ_KEEP_CLUSTER") == "1"  # as conftest's: keep the logs
    with SparkStandaloneCluster(workers=2, cores_per_worker=1, memory="1g", keep=keep) as cluster:
        yield cluster
    if keep:
        print(f"\nkept the Spark cluster's directory: {cluster.base_dir}", file=sys.stderr)


@pytest.fixture
def spark_cluster(standalone_cluster):
    """The module's Spark cluster with both workers running (a test before may have killed one)."""
    for index, worker in enumerate(standalone_cluster.workers):
        if not worker.is_running():
            standalone_cluster.restart_worker(index)
    return standalone_cluster


@pytest.fixture
def spark(spark_cluster, bare_python, monkeypatch):
    """An application of its own for each test: one executor on each worker (get_spark
    returns once both registered), released at the end."""
    monkeypatch.setenv("PYSPARK_PYTHON", bare_python)  # read when the SparkContext starts
    conf = {**spark_cluster.app_conf(), **RETRY_CONF, **BARE_PYTHON_CONF}
    session = get_spark(spark_cluster.master_url, conf=conf)
    yield session
    session.stop()


# ------------------------------------------------------------------ helpers


def _rows() -> list[tuple[str, int, int, str]]:
    """(channel, part, n, text): ``part`` is the partition a row is in."""
    return [(f"ch{n % 2}", n // ROWS_PER_PARTITION, n, f"payload {n}") for n in range(ROWS)]


def _dataframe(spark):
    # parallelize slices the list in order: partition p holds the rows with part = p.
    rdd = spark.sparkContext.parallelize(_rows(), PARTITIONS)
    return spark.createDataFrame(rdd, "channel string, part int, n int, text string")


def _assert_each_row_exactly_once(db) -> None:
    """Every row one message (none lost, none twice), and one message per key."""
    stored = db.call("SELECT channel, key, convert_from(content, 'UTF8')::jsonb FROM lonnymq.message")
    assert sorted((ch, c["part"], c["n"], c["text"]) for ch, _, c in stored) == sorted(_rows())
    per_key = Counter((ch, key) for ch, key, _ in stored)
    assert len(per_key) == ROWS and max(per_key.values()) == 1, per_key.most_common(3)


def _stored_partitions(db) -> set[int]:
    """The partitions whose rows are all stored."""
    counts = db.call("SELECT (convert_from(content, 'UTF8')::jsonb->>'part')::int, count(*)"
                     " FROM lonnymq.message GROUP BY 1")
    return {part for part, count in counts if count == ROWS_PER_PARTITION}


def _still_running(job: Future) -> None:
    if job.done():
        result = job.result()  # raises the job's error, if it failed
        pytest.fail(f"the enqueue ended before its writes reached the gate:\n{result.report()}")


def _cli_still_running(cli: subprocess.Popen, out: Path, err: Path) -> None:
    if cli.poll() is not None:
        pytest.fail(f"the CLI exited ({cli.returncode}) before its writes reached the gate:\n"
                    f"{out.read_text()}{err.read_text()}")


def _socket_inode(client_port: int, server_port: int) -> str | None:
    """The inode of the client end of the TCP connection 127.0.0.1:client_port -> :server_port."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(address.split(":")[1], 16) for address in fields[1:3])
        if (local, remote) == (client_port, server_port):
            return fields[9]
    return None


def _connection_owner(cluster: SparkStandaloneCluster, client_port: int, server_port: int) -> tuple[int, int]:
    """(worker index, pid) of the process under a worker that holds the client end of a
    connection to the server (a Python worker running a task)."""
    inode = _socket_inode(client_port, server_port)
    assert inode is not None, f"no TCP connection from port {client_port} to {server_port}"
    owners = []
    for index, worker in enumerate(cluster.workers):
        for pid in worker.process_tree():
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                        owners.append((index, pid))
                except OSError:
                    continue
    assert len(owners) == 1, f"the connection from port {client_port} is held by {owners} (worker, pid)"
    return owners[0]


@dataclass(frozen=True)
class Writer:
    """A write task blocked at the gate."""

    backend_pid: int
    client_pid: int  # the Python worker that runs the task
    worker: int  # index of the Spark worker it runs under


class WriteGate:
    """An open transaction holding SHARE on lonnymq.message: a write task blocks at its
    first message insert, with its own transaction open, until open()."""

    def __init__(self, db, cluster: SparkStandaloneCluster) -> None:
        self.cluster = cluster
        self.server_port = db.cluster.port
        self._holder = db.connect(autocommit=False)
        self._holder.execute("LOCK TABLE lonnymq.message IN SHARE MODE")
        self._holder_pid = self._holder.info.backend_pid
        self._observer = db.connect()

    def __enter__(self) -> WriteGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.open()

    def open(self) -> None:
        if not self._holder.closed:
            self._holder.commit()
            self._holder.close()

    def wait_for_writers(self, count: int, job_running: Callable[[], None],
                         timeout: float = JOB_TIMEOUT) -> list[Writer]:
        """Wait until ``count`` write tasks are blocked at the gate; where each one runs.
        ``job_running`` raises when the job has ended (failed: its error)."""
        deadline = time.monotonic() + timeout
        while True:
            job_running()
            rows = self._observer.execute(
                "SELECT pid, client_port FROM pg_catalog.pg_stat_activity"
                " WHERE %s = ANY (pg_catalog.pg_blocking_pids(pid)) ORDER BY pid",
                (self._holder_pid,)).fetchall()
            if len(rows) >= count:
                break
            assert time.monotonic() < deadline, f"{len(rows)} of {count} write tasks reached the gate"
            time.sleep(0.05)
        writers = []
        for backend_pid, client_port in rows:
            assert client_port is not None, "a write task connected over the unix socket: use the TCP DSN"
            worker, client_pid = _connection_owner(self.cluster, client_port, self.server_port)
            writers.append(Writer(backend_pid, client_pid, worker))
        return writers

    def wait_disconnected(self, backend_pid: int, timeout: float = 60) -> None:
        """Wait until a backend has ended (its client closed the connection)."""
        deadline = time.monotonic() + timeout
        while self._observer.execute("SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid = %s",
                                     (backend_pid,)).fetchone():
            assert time.monotonic() < deadline, f"backend {backend_pid} still connected after {timeout}s"
            time.sleep(0.05)


def _writers_on_both_workers(gate: WriteGate, job_running: Callable[[], None]) -> dict[int, Writer]:
    """The first wave: one write task blocked on each worker (one core each)."""
    writers = gate.wait_for_writers(2, job_running)
    by_worker = {w.worker: w for w in writers}
    assert sorted(by_worker) == [0, 1], writers
    return by_worker


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("victim_committed", [False, True], ids=["before-commit", "after-commit"])
def test_enqueue_is_exactly_once_when_a_worker_dies_mid_job(spark, spark_cluster, db, victim_committed):
    dsn = db.cluster.tcp_dsn(db.name)  # TCP: the gate tells the workers apart by the client ports
    df = _dataframe(spark)
    # The gate opens (on the way out too) before the pool waits for the job.
    with ThreadPoolExecutor(max_workers=1) as pool, WriteGate(db, spark_cluster) as gate:
        job: Future = pool.submit(enqueue, spark, df, dsn, SPEC, progress=Progress("enqueue", quiet=True))
        try:
            victim = _writers_on_both_workers(gate, lambda: _still_running(job))[VICTIM]
            if victim_committed:
                frozen = spark_cluster.freeze_executors(VICTIM)
                gate.open()
                gate.wait_disconnected(victim.backend_pid)  # its Python worker committed and closed
                stored_at_kill = _stored_partitions(db)
                assert stored_at_kill, "the victim's transaction did not commit"
            else:
                frozen = []
                stored_at_kill = _stored_partitions(db)
                assert stored_at_kill == set()  # the gate holds every write
            assert not job.done(), "the job ended before the kill"
            killed = spark_cluster.kill_worker(VICTIM)
            # The kill took the Python worker running the write task, and the frozen executor.
            assert victim.client_pid in killed and set(frozen) <= set(killed), (victim, frozen, killed)
            gate.open()
            result = job.result(timeout=JOB_TIMEOUT)
        except BaseException:
            spark.sparkContext.cancelAllJobs()  # else the pool would wait for a job stuck on a frozen executor
            raise

    # Exactly the lost task ran again, on the surviving worker, and succeeded.
    assert result.retried_partitions == 1, result.report()
    (rerun,) = [part for part, attempt in result.attempts.items() if attempt > 0]
    if victim_committed:
        assert rerun in stored_at_kill  # its rows were committed once already, by the lost attempt
    assert (result.rows, result.bad_rows, result.messages, result.exit_code) == (ROWS, 0, ROWS, 0)
    _assert_each_row_exactly_once(db)


def test_cli_enqueue_runs_on_both_workers(spark_cluster, bare_python, db, tmp_path):
    """``python -m pipeline enqueue --master spark://...``: its driver in another process,
    a shuffle (--partitions) between the executors, write tasks on both workers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = tmp_path / "rows.parquet"  # Parquet: its schema is in the file, no job infers it
    pq.write_table(pa.Table.from_pylist([dict(zip(("channel", "part", "n", "text"), row)) for row in _rows()]),
                   source)
    conf = [arg for key, value in {**spark_cluster.app_conf(), **RETRY_CONF, **BARE_PYTHON_CONF}.items()
            for arg in ("--conf", f"{key}={value}")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "LONNYMQ_PIPELINE", "PYSPARK_"))}
    env["PYSPARK_PYTHON"] = bare_python
    command = [sys.executable, "-m", "pipeline", "enqueue", str(source), "--channel-col", "channel",
               "--key-col", "n", "--partitions", str(PARTITIONS), "--dsn", db.cluster.tcp_dsn(db.name),
               "--master", spark_cluster.master_url, *conf]
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"  # files: a full pipe would stall it
    with WriteGate(db, spark_cluster) as gate, open(out_path, "w") as stdout, open(err_path, "w") as stderr:
        cli = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=stdout, stderr=stderr)
        try:
            _writers_on_both_workers(gate, lambda: _cli_still_running(cli, out_path, err_path))
            gate.open()
            cli.wait(timeout=JOB_TIMEOUT)
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
    out, err = out_path.read_text(), err_path.read_text()
    assert cli.returncode == 0, out + err
    assert f"rows read: {ROWS}" in out and "bad rows: 0" in out, out
    assert f"messages enqueued (new, or already there with the same key): {ROWS}" in out, out
    assert f"partitions: {PARTITIONS}, retried after a failure: 0" in out, out
    _assert_each_row_exactly_once(db)
    assert sorted(int(key) for (key,) in db.call("SELECT key FROM lonnymq.message")) == list(range(ROWS))
