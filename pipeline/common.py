"""Shared pieces: errors, the connection string, progress lines on stderr."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # pragma: no cover
    from pyspark import SparkContext

APPLICATION_NAME = "lonnymq-pipeline"

# libpq environment variables carried into the DSN that executors receive: an
# executor on another machine does not see the driver's environment.
_LIBPQ_ENV = {
    "PGHOST": "host",
    "PGHOSTADDR": "hostaddr",
    "PGPORT": "port",
    "PGUSER": "user",
    "PGDATABASE": "dbname",
    "PGPASSWORD": "password",
    "PGSSLMODE": "sslmode",
    "PGCONNECT_TIMEOUT": "connect_timeout",
    "PGOPTIONS": "options",
}


class PipelineError(Exception):
    """A usage, input or connection problem: the CLI exits with status 2."""


def resolve_dsn(dsn: str | None = None, environ: dict[str, str] | None = None) -> str:
    """A complete libpq conninfo string, resolved on the driver.

    The libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, ...)
    gives the defaults; ``dsn`` (key=value or URI) overrides them.
    """
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    env = os.environ if environ is None else environ
    params: dict[str, str] = {key: env[var] for var, key in _LIBPQ_ENV.items() if env.get(var)}
    if dsn:
        try:
            params.update({k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None})
        except Exception as exc:  # psycopg.ProgrammingError: a malformed DSN
            raise PipelineError(f"bad --dsn: {exc}") from exc
    params.setdefault("application_name", APPLICATION_NAME)
    return make_conninfo(**params)


def check_connection(dsn: str, *, need: tuple[str | tuple[str, ...], ...] = (), since: str = "0.2.0") -> str:
    """Connect once from the driver; return the installed lonnymq version.

    ``need``: what must exist: regprocedure signatures such as
    ``lonnymq.message_create_batch(text,bytea[],bigint[],text[],jsonb[],bigint[],text)``,
    table names (``lonnymq.message_history``) or columns
    (``lonnymq.message_history.headers``); a tuple of them: any one of them.
    ``since``: the first lonnymq version that has them all (for the error
    message). Raises PipelineError when the server cannot be reached or lacks them.
    """
    import psycopg

    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=15)
    except psycopg.Error as exc:
        raise PipelineError(f"cannot connect to PostgreSQL: {str(exc).strip()}") from exc

    def exists(name: str) -> bool:
        if "(" in name:
            query, args = "SELECT pg_catalog.to_regprocedure(%s) IS NOT NULL", [name]
        elif name.count(".") == 2:
            table, column = name.rsplit(".", 1)
            query = ("SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute WHERE attrelid = pg_catalog.to_regclass(%s)"
                     " AND attname = %s AND attnum > 0 AND NOT attisdropped)")
            args = [table, column]
        else:
            query, args = "SELECT pg_catalog.to_regclass(%s) IS NOT NULL", [name]
        return bool(conn.execute(query, args).fetchone()[0])

    try:
        row = conn.execute(
            "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'lonnymq'").fetchone()
        if row is None:
            raise PipelineError("the extension lonnymq is not installed in this database "
                                "(CREATE EXTENSION lonnymq)")
        missing = []
        for item in need:
            names = (item,) if isinstance(item, str) else item
            if not any(exists(n) for n in names):
                missing.append(" or ".join(names))
        if missing:
            raise PipelineError(f"lonnymq {row[0]} lacks {', '.join(missing)}: "
                                f"the pipeline needs lonnymq {since} or later")
        return str(row[0])
    except psycopg.Error as exc:
        raise PipelineError(f"cannot use lonnymq on this connection: {str(exc).strip()}") from exc
    finally:
        conn.close()


class Progress:
    """Timestamped progress lines on stderr: ``[  12.3s] enqueue: ...``."""

    def __init__(self, name: str, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.name = name
        self.stream = stream
        self.quiet = quiet
        self.t0 = time.monotonic()
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        with self._lock:
            print(f"[{time.monotonic() - self.t0:7.1f}s] {self.name}: {message}",
                  file=self.stream or sys.stderr, flush=True)

    @contextmanager
    def spark_job(self, sc: SparkContext, label: str, interval: float = 1.0) -> Iterator[None]:
        """Run the Spark actions of the block in a job group of their own, and print
        its task counts (done / running / failed of total) whenever they change."""
        group = f"{APPLICATION_NAME}-{uuid.uuid4().hex[:12]}"
        sc.setJobGroup(group, label)
        stop = threading.Event()

        def counts() -> tuple[int, int, int, int]:
            tracker = sc.statusTracker()
            total = done = active = failed = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else ():
                    stage = tracker.getStageInfo(stage_id)
                    # Only stages that started a task: a stage whose output an
                    # earlier job left is skipped, and its tasks would never count
                    # as done ("5/7 tasks done"); one still waiting counts once it
                    # starts.
                    if stage and (stage.numActiveTasks or stage.numCompletedTasks or stage.numFailedTasks):
                        total += stage.numTasks
                        done += stage.numCompletedTasks
                        active += stage.numActiveTasks
                        failed += stage.numFailedTasks
            return total, done, active, failed

        last: list[tuple[int, int, int, int] | None] = [None]

        def report() -> None:
            now = counts()
            if now != last[0] and now[0]:
                total, done, active, failed = now
                extra = f", {failed} failed attempt(s)" if failed else ""
                self(f"{label}: {done}/{total} tasks done, {active} running{extra}")
                last[0] = now

        def poll() -> None:
            while not stop.wait(interval):
                try:
                    report()
                except Exception:  # noqa: BLE001 - the context is shutting down
                    return

        thread = threading.Thread(target=poll, name=f"progress-{group}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)
            # The final counts, also for a job shorter than one interval (the
            # poll printed nothing then).
            try:
                report()
            except Exception:  # noqa: BLE001 - the context is shutting down
                pass
            sc.setLocalProperty("spark.jobGroup.id", None)
            sc.setLocalProperty("spark.job.description", None)
