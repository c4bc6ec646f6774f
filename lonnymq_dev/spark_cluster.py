"""A throwaway Spark standalone cluster on this machine, for tests and demos.

    from lonnymq_dev.spark_cluster import SparkStandaloneCluster
    from pipeline import get_spark

    with SparkStandaloneCluster(workers=2) as cluster:      # master + 2 workers, ready
        spark = get_spark(cluster.master_url, conf=cluster.app_conf())
        ...                                                 # one executor on each worker
        cluster.kill_worker(0)                              # SIGKILL worker 0 and all under it
        spark.stop()
    # every process killed and the directory removed here

Or by hand: ``python -m lonnymq_dev.spark_cluster [--workers N]`` starts one
and prints its master URL until Ctrl-C.

What runs: a master and N workers, each a JVM of its own started with the
``bin/spark-class`` of the installed pyspark (a pip-installed pyspark is a
complete Spark distribution: SPARK_HOME is its package directory). All of them
bind to 127.0.0.1 on free ports; their logs, work directories (where the
workers run executors) and an empty SPARK_CONF_DIR live in a fresh temporary
directory. The master's REST submission server is off (it would take the
fixed port 6066). Needs Linux (/proc) and a Java 17+ runtime (``java`` on PATH
or JAVA_HOME).

The processes: every daemon runs in a session and process group of its own
(Ctrl-C in the terminal does not reach them); a worker's executor JVMs are its
children, and each executor's Python daemon and workers its descendants (the
PySpark daemon puts itself in a process group of its own, so a process group
is not enough: kills walk the process tree). Stopping SIGKILLs every tree:
the cluster is throwaway. Safety nets for an owner that does not get to call
stop(): an atexit handler, and PR_SET_PDEATHSIG, which SIGKILLs a master or
worker when the thread that started it dies (so start clusters from a thread
that outlives them, e.g. the main thread); orphaned executors then exit on
their own when their worker's connection drops.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lonnymq_dev.pgcluster import free_port

__all__ = ["SparkDaemon", "SparkClusterError", "SparkStandaloneCluster", "process_tree", "remove_stale_dirs",
           "spark_home"]

HOST = "127.0.0.1"
DIR_PREFIX = "lonnymq-sparkcluster-"
OWNER_FILE = "owner.pid"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"

_PR_SET_PDEATHSIG = 1
# The master's JSON is on 127.0.0.1: never through an http_proxy from the environment.
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class SparkClusterError(RuntimeError):
    """A cluster could not be started (the message carries the logs' tails), or a process not be killed."""


def spark_home() -> Path:
    """The installed pyspark's package directory, which holds bin/spark-class and jars/."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise SparkClusterError(f"{home} has no bin/spark-class or jars/: not a full pyspark install")
    return home


# ------------------------------------------------------------------ processes


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": the name may hold spaces
    return int(fields[1]), fields[0]


def _is_running(pid: int) -> bool:
    """Exists and is not a zombie (a zombie waits for its parent, maybe PID 1, to reap it)."""
    stat = _stat(pid)
    return stat is not None and stat[1] not in ("Z", "X")


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live descendant of it, parents before children."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] not in ("Z", "X"):
                children.setdefault(stat[0], []).append(int(entry))
    tree, todo = [], [pid] if _is_running(pid) else []
    while todo:
        p = todo.pop(0)
        tree.append(p)
        todo.extend(sorted(children.get(p, ())))
    return tree


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait until none of ``pids`` runs; return those still running at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if _is_running(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def _kill_tree(root: int, timeout: float = 30) -> list[int]:
    """SIGKILL ``root`` and all its descendants at once; return their pids.

    The tree is frozen first (SIGSTOP, repeated until no new process appears),
    so that no process escapes by forking between the listing and the kill."""
    frozen: list[int] = []
    while new := [p for p in process_tree(root) if p not in frozen]:
        _signal(new, signal.SIGSTOP)
        frozen.extend(new)
    _signal(frozen, signal.SIGKILL)
    left = _wait_gone(frozen, timeout)
    if left:
        raise SparkClusterError(f"processes {left} survived SIGKILL for {timeout}s")
    return frozen


def remove_stale_dirs(tmp_root: str | os.PathLike | None = None) -> list[Path]:
    """Remove the directories of clusters whose owner process is gone (it was killed
    before it could stop them; PR_SET_PDEATHSIG took its daemons). Returns them."""
    removed = []
    for base in sorted(Path(tmp_root or tempfile.gettempdir()).glob(DIR_PREFIX + "*")):
        try:
            owner = int((base / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # being created, or not ours
        if not _is_running(owner):
            shutil.rmtree(base, ignore_errors=True)
            removed.append(base)
    return removed


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


# -------------------------------------------------------------------- daemons


@dataclass
class SparkDaemon:
    """A master or worker JVM that we started (its pid is the JVM's: spark-class ends in exec)."""

    name: str  # "master", "worker-0", ...
    process: subprocess.Popen
    port: int  # RPC port
    webui_port: int
    log_path: Path
    work_dir: Path | None = None  # a worker's: app-*/<executor id>/{stdout,stderr}

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_running(self) -> bool:
        return self.process.poll() is None

    def process_tree(self) -> list[int]:
        """This JVM and everything under it: executor JVMs, their Python daemons and workers."""
        return process_tree(self.pid) if self.is_running() else []

    def executor_pids(self) -> list[int]:
        """The executor JVMs a worker runs now (its children running CoarseGrainedExecutorBackend)."""
        return [p for p in self.process_tree()[1:] if EXECUTOR_CLASS in _cmdline(p)]

    def log_tail(self, max_bytes: int = 4000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-max_bytes:].decode(errors="replace")

    def __repr__(self) -> str:
        return f"<SparkDaemon {self.name} pid={self.pid} port={self.port} running={self.is_running()}>"


class SparkStandaloneCluster:
    """A Spark standalone master and ``workers`` workers on 127.0.0.1 (see the module docstring).

    workers: how many workers; each offers ``cores_per_worker`` cores and
        ``memory`` (e.g. "1g") to executors.
    daemon_memory: the heap of the master and worker JVMs themselves.
    jvm_options: for the master, the workers and (through app_conf) the executors.
        The default suits short-lived JVMs on a small machine: the C1 compiler
        only and the serial GC about halve their start-up CPU time, and the
        start of a cluster with an application on it.
    start_timeout: seconds to wait for the master, then for the workers to register.
    keep: leave the temporary directory (logs, executor stderr) after stop().

    After start(): ``master_url`` (spark://127.0.0.1:PORT), ``master_webui``,
    ``workers`` (SparkDaemon each, by index; a killed one stays in its place
    until restart_worker). ``app_conf()`` gives the Spark settings an
    application needs to run here with one executor on each worker.
    """

    def __init__(
        self,
        workers: int = 2,
        cores_per_worker: int = 1,
        memory: str = "1g",
        *,
        daemon_memory: str = "512m",
        jvm_options: str = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        start_timeout: float = 90,
        keep: bool = False,
    ) -> None:
        if workers < 1 or cores_per_worker < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        self.num_workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.jvm_options = jvm_options
        self.start_timeout = start_timeout
        self.keep = keep
        self.spark_home = spark_home()
        self.base_dir: Path | None = None
        self.master: SparkDaemon | None = None
        self.workers: list[SparkDaemon] = []

    # ------------------------------------------------------------ properties

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self._require_master().port}"

    @property
    def master_webui(self) -> str:
        return f"http://{HOST}:{self._require_master().webui_port}"

    def _require_master(self) -> SparkDaemon:
        if self.master is None:
            raise SparkClusterError("the cluster is not started")
        return self.master

    def app_conf(self, executor_memory: str = "512m") -> dict[str, str]:
        """Settings for an application (``get_spark(cluster.master_url, conf=...)``) on this cluster.

        One executor per worker with all its cores, and as many default
        partitions as cores; the driver binds to 127.0.0.1 like the rest; and
        the SparkSession is returned once every executor has registered
        (without that, the first job may start, and finish, on one executor)."""
        cores = self.num_workers * self.cores_per_worker
        return {
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.executor.cores": str(self.cores_per_worker),
            "spark.executor.memory": executor_memory,
            "spark.executor.extraJavaOptions": self.jvm_options,
            "spark.cores.max": str(cores),
            "spark.default.parallelism": str(cores),
            "spark.sql.shuffle.partitions": str(cores),
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": f"{int(self.start_timeout)}s",
            "spark.ui.enabled": "false",
        }

    # ------------------------------------------------------------ start / stop

    def _env(self) -> dict[str, str]:
        assert self.base_dir is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        master_opts = [
            "-Dspark.master.rest.enabled=false",  # else a REST server on the fixed port 6066
            "-Dspark.deploy.spreadOut=true",  # an application's executors on as many workers as possible
        ]
        env.update(
            SPARK_HOME=str(self.spark_home),
            SPARK_CONF_DIR=str(self.base_dir / "conf"),  # empty: no spark-env.sh or defaults from elsewhere
            SPARK_LOCAL_IP=HOST,  # workers and executors bind to it (and advertise it)
            SPARK_LOG_DIR=str(self.base_dir / "logs"),  # where _spawn writes each daemon's log too
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            SPARK_MASTER_OPTS=" ".join(master_opts),
            # A port taken between free_port() and the JVM's bind: fail, rather than
            # bind the next one, which this object would not know.
            SPARK_DAEMON_JAVA_OPTS=f"-Dspark.port.maxRetries=0 {self.jvm_options}",
            PYSPARK_PYTHON=sys.executable,
        )
        return env

    def _spawn(self, name: str, main_class: str, args: list[str], port: int, webui_port: int,
               work_dir: Path | None = None) -> SparkDaemon:
        assert self.base_dir is not None
        log_path = self.base_dir / "logs" / f"{name}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [str(self.spark_home / "bin" / "spark-class"), main_class, *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.base_dir, env=self._env(), start_new_session=True,
                preexec_fn=_die_with_parent if _libc is not None else None,
            )
        return SparkDaemon(name, process, port, webui_port, log_path, work_dir)

    def start(self) -> SparkStandaloneCluster:
        """Start the master, wait until it is up, start the workers, wait until all are ALIVE."""
        if self.master is not None:
            raise SparkClusterError("already started")
        remove_stale_dirs()
        self.base_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
        for sub in ("conf", "logs", "work"):
            (self.base_dir / sub).mkdir()
        (self.base_dir / OWNER_FILE).write_text(f"{os.getpid()}\n")
        atexit.register(self.stop)
        try:
            port, webui_port = free_port(), free_port()
            self.master = self._spawn("master", MASTER_CLASS,
                                      ["--host", HOST, "--port", str(port), "--webui-port", str(webui_port)],
                                      port, webui_port)
            # Workers started before the master listens retry only after 5 to 15 s.
            self._wait(lambda: self.status().get("status") == "ALIVE", "the master to be ALIVE", [self.master])
            self.workers = [self._spawn_worker(i) for i in range(self.num_workers)]
            self._wait_registered(self.workers)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn_worker(self, index: int) -> SparkDaemon:
        assert self.base_dir is not None
        name = f"worker-{index}"
        work_dir = self.base_dir / "work" / f"{name}-{time.monotonic_ns()}"
        work_dir.mkdir()
        port, webui_port = free_port(), free_port()
        return self._spawn(name, WORKER_CLASS, [
            "--host", HOST, "--port", str(port), "--webui-port", str(webui_port),
            "--cores", str(self.cores_per_worker), "--memory", self.memory,
            "--work-dir", str(work_dir), self.master_url,
        ], port, webui_port, work_dir)

    def restart_worker(self, index: int) -> SparkDaemon:
        """Start a fresh worker in place of worker ``index`` (killed or not) and wait until it is ALIVE."""
        old = self.workers[index]
        if old.is_running():
            _kill_tree(old.pid)
            old.process.wait()
        self.workers[index] = self._spawn_worker(index)
        self._wait_registered([self.workers[index]])
        return self.workers[index]

    def stop(self) -> None:
        """SIGKILL the workers (with their executors) and the master; remove the directory
        unless ``keep``. Idempotent, and safe on a partly started cluster."""
        atexit.unregister(self.stop)
        errors = []
        for daemon in [*self.workers, *([self.master] if self.master else [])]:
            try:
                if daemon.is_running():
                    _kill_tree(daemon.pid)
                daemon.process.wait(timeout=30)
            except (SparkClusterError, subprocess.TimeoutExpired) as exc:
                errors.append(f"{daemon.name}: {exc}")
        self.workers, self.master = [], None
        if self.base_dir is not None and not self.keep:
            shutil.rmtree(self.base_dir, ignore_errors=True)
        if errors:
            raise SparkClusterError("; ".join(errors))

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ state

    def status(self) -> dict[str, Any]:
        """The master's JSON status (http://127.0.0.1:<webui>/json/): workers with their
        state and cores used, applications, ... An empty dict while it does not answer."""
        try:
            with _http.open(f"{self.master_webui}/json/", timeout=5) as response:
                return json.load(response)
        except (urllib.error.URLError, OSError, ValueError):
            return {}

    def _wait_registered(self, workers: list[SparkDaemon]) -> None:
        """Wait until the master reports these workers ALIVE (and fail if one exits)."""
        ports = [w.port for w in workers]

        def all_alive() -> bool:
            states = {w.get("port"): w.get("state") for w in self.status().get("workers", ())}
            return all(states.get(port) == "ALIVE" for port in ports)

        self._wait(all_alive, f"{', '.join(w.name for w in workers)} to register",
                   [self._require_master(), *workers])

    def _wait(self, ready, what: str, must_run: list[SparkDaemon], timeout: float | None = None) -> None:
        """Poll ``ready()`` until true; raise, with the logs' tails, on the timeout or
        as soon as one of ``must_run`` has exited."""
        timeout = timeout or self.start_timeout
        deadline = time.monotonic() + timeout
        while not ready():
            exited = [d for d in must_run if not d.is_running()]
            if exited or time.monotonic() > deadline:
                why = f"{', '.join(d.name for d in exited)} exited" if exited else f"timed out after {timeout}s"
                logs = "\n".join(f"--- {d.name} ({d.log_path}):\n{d.log_tail()}" for d in exited or must_run)
                raise SparkClusterError(f"waiting for {what}: {why}\n{logs}")
            time.sleep(0.1)

    # ------------------------------------------------------------ faults

    def kill_worker(self, index: int) -> list[int]:
        """SIGKILL worker ``index`` together with everything under it (executor JVMs, their
        Python daemons and workers), as when its machine dies; wait until they are gone.
        Returns the pids killed. The master and the drivers notice through the dropped
        connections."""
        worker = self.workers[index]
        if not worker.is_running():
            raise SparkClusterError(f"{worker.name} is not running")
        killed = _kill_tree(worker.pid)
        worker.process.wait(timeout=30)
        return killed

    def freeze_executors(self, index: int) -> list[int]:
        """SIGSTOP the executor JVMs of worker ``index`` (not their Python workers): they stop
        answering, like a JVM in a long pause, while the Python side of a running task goes
        on. Returns their pids; kill_worker() ends them."""
        pids = self.workers[index].executor_pids()
        if not pids:
            raise SparkClusterError(f"{self.workers[index].name} runs no executor")
        _signal(pids, signal.SIGSTOP)
        return pids

    def __repr__(self) -> str:
        url = self.master_url if self.master else "not started"
        return f"<SparkStandaloneCluster {url} workers={len(self.workers)}>"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lonnymq_dev.spark_cluster",
                                     description="Start a Spark standalone cluster on 127.0.0.1 until Ctrl-C.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (1)")
    parser.add_argument("--memory", default="1g", help="memory per worker for executors (1g)")
    args = parser.parse_args(argv)
    # Stop cleanly on Ctrl-C and on kill, also when started in the background (where
    # the shell has SIGINT ignored).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)
    with SparkStandaloneCluster(args.workers, args.cores, args.memory) as cluster:
        print(f"master: {cluster.master_url}  (web UI {cluster.master_webui}, logs {cluster.base_dir}/logs)")
        for w in cluster.workers:
            print(f"{w.name}: pid {w.pid}, port {w.port}, web UI http://{HOST}:{w.webui_port}")
        conf = " ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in cluster.app_conf().items())
        print(f"try: python -m pipeline enqueue ... --master {cluster.master_url} {conf}")
        print("Ctrl-C stops it.", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
