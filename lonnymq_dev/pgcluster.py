"""Throwaway PostgreSQL clusters for lonnymq's tests, demo and benchmarks.

    from lonnymq_dev.pgcluster import Cluster

    with Cluster() as cluster:              # initdb + start
        cluster.create_database("demo")     # CREATE DATABASE + CREATE EXTENSION lonnymq
        print(cluster.psql("SELECT lonnymq.to_epoch(now())", dbname="demo"))
        conninfo = cluster.dsn("demo")      # for psycopg.connect(conninfo)
    # stopped and removed here (atexit does the same as a safety net)

Each cluster lives in a fresh temporary directory (data directory, unix socket
directory) and listens on that private socket and on 127.0.0.1 at a free port.
Everyone connects as the superuser ``postgres`` with trust authentication.
Binaries come from ``$PG_CONFIG --bindir`` (``pg_config`` by default), never
from PATH.

When the caller is root, initdb / pg_ctl / postgres run as the unprivileged OS
user ``postgres`` (created with ``useradd --system`` if missing); otherwise as
the calling user. Clients (psql, pg_prove, psycopg) run as the caller.

Clusters left behind by a killed process are found and removed by the next
Cluster() of any process (see ``reap_stale``).
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterable, Mapping

__all__ = ["Cluster", "ClusterError", "pg_bindir", "free_port", "reap_stale"]

DIR_PREFIX = "lonnymq-pgcluster-"
OWNER_FILE = "owner.pid"
SUPERUSER = "postgres"
SERVICE_OS_USER = "postgres"
_LOG_NAME = "postgresql.log"

_live: "set[Cluster]" = set()
_live_lock = threading.Lock()
_reaped = False


class ClusterError(RuntimeError):
    """A cluster could not be created, started or stopped."""


def pg_bindir(pg_config: str | None = None) -> Path:
    """``pg_config --bindir`` (pg_config from $PG_CONFIG, else PATH)."""
    pg_config = pg_config or os.environ.get("PG_CONFIG") or "pg_config"
    try:
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ClusterError(
            f"cannot run {pg_config!r} --bindir ({exc}); install postgresql-15 and "
            "postgresql-server-dev-15 (make deps) or set PG_CONFIG"
        ) from exc
    return Path(out)


def _major_of(bindir: Path) -> int:
    """The server's major version (postgres --version: "postgres (PostgreSQL) 17.11")."""
    out = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True).stdout
    m = re.search(r"\(PostgreSQL\) (\d+)", out)
    if not m:
        raise ClusterError(f"cannot read the version of {bindir / 'postgres'}: {out!r}")
    return int(m.group(1))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (bind port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _quote_conninfo(value: str) -> str:
    if value and re.fullmatch(r"[A-Za-z0-9_./:@+-]+", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _client_env() -> dict[str, str]:
    """The caller's environment without libpq variables that would redirect clients."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.setdefault("LC_ALL", "C.UTF-8")
    return env


def _pid_alive(pid: int) -> bool:
    """True when the process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc: trust kill(0)
    return state != "Z"


def _ensure_os_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home",
         "--home-dir", "/var/lib/postgresql", "--shell", "/bin/sh", name],
        check=True, capture_output=True,
    )
    return pwd.getpwnam(name)


def reap_stale(tmp_root: str | os.PathLike | None = None) -> list[Path]:
    """Stop and remove clusters whose owning process is gone (killed test runs).

    Returns the directories removed. Directories we may not touch are skipped.
    """
    removed: list[Path] = []
    root = Path(tmp_root or tempfile.gettempdir())
    try:
        candidates = sorted(root.glob(DIR_PREFIX + "*"))
    except OSError:
        return removed
    for base in candidates:
        try:
            owner = int((base / OWNER_FILE).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            # No owner file: either being created right now or not ours; leave it
            # unless it is old.
            try:
                if time.time() - base.stat().st_mtime < 3600:
                    continue
            except OSError:
                continue
            owner = -1
        if owner > 0 and _pid_alive(owner):
            continue
        data = base / "data"
        pidfile = data / "postmaster.pid"
        try:
            if pidfile.exists():
                pid = int(pidfile.read_text().split()[0])
                if _pid_alive(pid):
                    os.kill(pid, signal.SIGQUIT)  # immediate shutdown
                    deadline = time.monotonic() + 30
                    while _pid_alive(pid) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    if _pid_alive(pid):
                        os.kill(pid, signal.SIGKILL)
            shutil.rmtree(base)
            removed.append(base)
        except (OSError, ValueError, IndexError):
            continue
    return removed


class Cluster:
    """A throwaway PostgreSQL cluster (see the module docstring).

    Parameters:
        fsync: keep fsync on (default; crash tests rely on it).
        settings: extra postgresql.conf settings, e.g. {"log_statement": "all"}.
        pg_config: pg_config to take the binaries from (default $PG_CONFIG / pg_config).
        bindir: the server's binaries, instead of pg_config's (a build without pg_config).
        port: TCP port on 127.0.0.1 (default: a free one).
        keep: do not remove the directory on cleanup (for debugging).
    """

    def __init__(
        self,
        *,
        fsync: bool = True,
        settings: Mapping[str, object] | None = None,
        pg_config: str | None = None,
        bindir: str | os.PathLike | None = None,
        port: int | None = None,
        keep: bool = False,
    ) -> None:
        global _reaped
        if not _reaped:
            _reaped = True
            reap_stale()
        self.bindir = Path(bindir) if bindir else pg_bindir(pg_config)
        for tool in ("initdb", "pg_ctl", "postgres"):
            if not (self.bindir / tool).exists():
                raise ClusterError(f"{self.bindir / tool} not found")
        # psql of the server's own build, else ($PG_CONFIG's, Debian's) a client
        # that talks to it (a server-only build: lonnymq_dev.pgservers.unsupported_server).
        self.client_bindir = self.bindir if (self.bindir / "psql").exists() else pg_bindir(None)
        self.major = _major_of(self.bindir)
        self.fsync = fsync
        self.settings = dict(settings or {})
        self.keep = keep
        self.superuser = SUPERUSER
        self._fixed_port = port
        self.port = port or free_port()

        if os.geteuid() == 0:
            pw = _ensure_os_user(SERVICE_OS_USER)
            self._run_as: tuple[int, int] | None = (pw.pw_uid, pw.pw_gid)
        else:
            self._run_as = None

        self.base_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
        (self.base_dir / OWNER_FILE).write_text(f"{os.getpid()}\n")
        self.data_dir = self.base_dir / "data"
        self.socket_dir = self.base_dir / "sock"
        if len(str(self.socket_dir)) > 80:  # sun_path is ~107 bytes incl. "/.s.PGSQL.NNNNN"
            self.socket_dir = Path(tempfile.mkdtemp(prefix="lmq-sock-", dir="/tmp"))
        else:
            self.socket_dir.mkdir(mode=0o700)
        if self._run_as:
            uid, gid = self._run_as
            for p in (self.base_dir, self.socket_dir):
                os.chown(p, uid, gid)
        self.log_path = self.data_dir / _LOG_NAME
        self._initialized = False
        self._running = False
        self._cleaned = False
        with _live_lock:
            _live.add(self)

    # ------------------------------------------------------------ processes

    def _server_env(self) -> dict[str, str]:
        env = _client_env()
        # A relocated build (lonnymq_dev/pgservers.py): its contrib modules (dblink)
        # find the build's own libpq only through the library path, their RUNPATH
        # naming the prefix the build was made in.
        libdir = self.bindir.parent / "lib"
        if (libdir / "libpq.so.5").exists():
            env["LD_LIBRARY_PATH"] = str(libdir)
        if self._run_as:
            pw = pwd.getpwuid(self._run_as[0])
            env.update(HOME=pw.pw_dir or "/", USER=pw.pw_name, LOGNAME=pw.pw_name)
        return env

    def _run_server_tool(self, args: list[str], *, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run initdb / pg_ctl as the service user, cwd inside the cluster dir."""
        kwargs: dict = {}
        if self._run_as:
            kwargs.update(user=self._run_as[0], group=self._run_as[1], extra_groups=[])
        return subprocess.run(
            args,
            cwd=self.base_dir,
            env=self._server_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            umask=0o077,
            **kwargs,
        )

    def _initdb(self) -> None:
        proc = self._run_server_tool([
            str(self.bindir / "initdb"),
            "-D", str(self.data_dir),
            "-U", self.superuser,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
            *(["--no-instructions"] if self.major >= 14 else []),
        ])
        if proc.returncode != 0:
            raise ClusterError(f"initdb failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.write("\n# lonnymq test harness\ninclude_if_exists = 'harness.conf'\n")
        self._initialized = True

    def _write_conf(self) -> None:
        conf: dict[str, object] = {
            "listen_addresses": "127.0.0.1",
            "port": self.port,
            "unix_socket_directories": str(self.socket_dir),
            "fsync": "on" if self.fsync else "off",
            "shared_buffers": "128MB",
            "max_connections": 100,
            "timezone": "UTC",
            "lc_messages": "C",
            "log_line_prefix": "%m [%p] %q%u@%d ",
            "log_timezone": "UTC",
            "log_checkpoints": "off",  # keeps the log tail in failure reports readable
        }
        conf.update(self.settings)
        lines = []
        for key, value in conf.items():
            if isinstance(value, bool):
                value = "on" if value else "off"
            if isinstance(value, (int, float)):
                lines.append(f"{key} = {value}")
            else:
                lines.append(f"{key} = '{str(value).replace(chr(39), chr(39) * 2)}'")
        path = self.data_dir / "harness.conf"
        path.write_text("\n".join(lines) + "\n")
        if self._run_as:
            os.chown(path, *self._run_as)

    def _pg_ctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return self._run_server_tool(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), *args], timeout=timeout
        )

    def start(self) -> "Cluster":
        """initdb (first time) and start the server; waits until it accepts connections."""
        if self._cleaned:
            raise ClusterError("cluster was cleaned up")
        if self._running:
            return self
        if not self._initialized:
            self._initdb()
        attempts = 1 if self._fixed_port else 5
        for attempt in range(attempts):
            self._write_conf()
            proc = self._pg_ctl("start", "-w", "-t", "120", "-s", "-l", str(self.log_path), timeout=180)
            if proc.returncode == 0:
                self._running = True
                return self
            log = self.log_tail()
            if attempt + 1 < attempts and ("could not bind" in log or "already in use" in log):
                self.port = free_port()  # lost the race for the port: try another one
                continue
            raise ClusterError(
                f"pg_ctl start failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}\n"
                f"--- {self.log_path} (tail) ---\n{log}"
            )
        raise ClusterError("could not start the cluster")  # pragma: no cover

    def stop(self, mode: str = "fast") -> None:
        """pg_ctl stop -m MODE (smart | fast | immediate); no-op when not running.

        "immediate" is a crash: the next start() runs crash recovery.
        """
        if mode not in ("smart", "fast", "immediate"):
            raise ValueError(f"bad stop mode {mode!r}")
        if not self._initialized or not self.is_running():
            self._running = False
            return
        proc = self._pg_ctl("stop", "-m", mode, "-w", "-t", "120", "-s", timeout=180)
        if proc.returncode != 0 and self.is_running():
            raise ClusterError(f"pg_ctl stop -m {mode} failed:\n{proc.stdout}\n{proc.stderr}")
        self._running = False

    def restart(self, mode: str = "fast") -> "Cluster":
        self.stop(mode)
        return self.start()

    def kill_immediate(self) -> None:
        """Immediate shutdown (pg_ctl stop -m immediate): no checkpoint, recovery on next start."""
        self.stop("immediate")

    def crash(self) -> None:
        """SIGKILL the postmaster and all its children at once (a harder crash than
        kill_immediate). The next start() runs crash recovery."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        victims = [pid, *self._children(pid)]
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while any(_pid_alive(p) for p in victims):
            if time.monotonic() > deadline:
                raise ClusterError(f"processes {victims} survived SIGKILL")
            time.sleep(0.02)
        # A killed postmaster may linger a while as a zombie until PID 1 reaps it, and
        # postgres would take its lock files (kill(pid, 0) succeeds) for a live server.
        # Every process is dead, so the lock files are stale: remove them.
        (self.data_dir / "postmaster.pid").unlink(missing_ok=True)
        for lock in self.socket_dir.glob(".s.PGSQL.*.lock"):
            lock.unlink(missing_ok=True)
        self._running = False

    @staticmethod
    def _children(pid: int) -> list[int]:
        kids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                kids.append(int(entry))
        return kids

    def postmaster_pid(self) -> int | None:
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if _pid_alive(pid) else None

    def is_running(self) -> bool:
        return self.postmaster_pid() is not None

    def cleanup(self) -> None:
        """Stop (immediate: it is throwaway) and remove the directories. Idempotent."""
        if self._cleaned:
            return
        try:
            try:
                self.stop("immediate")
            except (ClusterError, subprocess.TimeoutExpired):
                pid = self.postmaster_pid()
                if pid:
                    os.kill(pid, signal.SIGKILL)
        finally:
            self._cleaned = True
            with _live_lock:
                _live.discard(self)
            if not self.keep:
                shutil.rmtree(self.base_dir, ignore_errors=True)
                if not str(self.socket_dir).startswith(str(self.base_dir)):
                    shutil.rmtree(self.socket_dir, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"<Cluster {self.base_dir} port={self.port} running={self._running}>"

    # ------------------------------------------------------------ clients

    def dsn(self, dbname: str = "postgres", **params: object) -> str:
        """libpq conninfo over the unix socket: host=SOCKETDIR port=PORT user=postgres dbname=..."""
        kv = {"host": str(self.socket_dir), "port": self.port, "user": self.superuser, "dbname": dbname}
        kv.update(params)
        return " ".join(f"{k}={_quote_conninfo(str(v))}" for k, v in kv.items())

    def tcp_dsn(self, dbname: str = "postgres", **params: object) -> str:
        """Like dsn() but over TCP to 127.0.0.1."""
        return self.dsn(dbname, host="127.0.0.1", **params)

    def client_args(self, dbname: str = "postgres", user: str | None = None) -> list[str]:
        """-h/-p/-U/-d arguments for psql, pg_prove, pgbench, ... (as `user`,
        default the superuser)."""
        return ["-h", str(self.socket_dir), "-p", str(self.port), "-U", user or self.superuser, "-d", dbname]

    def client_env(self) -> dict[str, str]:
        """Environment for client programs: PG* variables of the caller removed, and
        PGHOST/PGPORT/PGUSER set to this cluster."""
        env = _client_env()
        env.update(PGHOST=str(self.socket_dir), PGPORT=str(self.port), PGUSER=self.superuser)
        return env

    def psql(self, sql: str, dbname: str = "postgres", *, check: bool = True, timeout: float = 300) -> str:
        """Run SQL (may be several statements / psql meta-commands) with psql, as the
        superuser, ON_ERROR_STOP; returns the unaligned, tuples-only output."""
        proc = subprocess.run(
            [str(self.client_bindir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             *self.client_args(dbname), "-f", "-"],
            input=sql,
            capture_output=True,
            text=True,
            env=self.client_env(),
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise ClusterError(f"psql failed ({proc.returncode}) on {dbname}:\n{proc.stderr}\nSQL:\n{sql}")
        return proc.stdout.rstrip("\n")

    def create_database(
        self,
        name: str,
        with_extension: bool = True,
        *,
        template: str | None = None,
        extensions: Iterable[str] | None = None,
    ) -> str:
        """CREATE DATABASE name [TEMPLATE template]; then, unless cloned from a template,
        CREATE EXTENSION for `extensions` (default: lonnymq when with_extension)."""
        stmt = f"CREATE DATABASE {_quote_ident(name)}"
        if template:
            stmt += f" TEMPLATE {_quote_ident(template)}"
        self.psql(stmt)
        if extensions is None:
            extensions = ("lonnymq",) if (with_extension and not template) else ()
        if extensions:
            self.psql("".join(f"CREATE EXTENSION IF NOT EXISTS {_quote_ident(e)} CASCADE;\n" for e in extensions),
                      dbname=name)
        return name

    def drop_database(self, name: str) -> None:
        self.psql(f"DROP DATABASE IF EXISTS {_quote_ident(name)} WITH (FORCE)")

    def log_tail(self, max_bytes: int = 8000) -> str:
        """The end of the server log (for failure reports)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - max_bytes))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


@atexit.register
def _cleanup_all() -> None:
    with _live_lock:
        clusters = list(_live)
    for c in clusters:
        try:
            c.cleanup()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
