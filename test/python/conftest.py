"""pytest fixtures for lonnymq.

Fixtures:
    cluster      (session)  one throwaway PostgreSQL cluster for the whole run (lonnymq_dev.pgcluster.Cluster)
    template_db  (session)  name of the database `lonnymq_template`, which has
                            CREATE EXTENSION pgtap; CREATE EXTENSION lonnymq;
    db           (function) a fresh Database cloned from the template for each test
    module_db    (module)   the same, shared by all tests of one module
    connect      (function) db.connect: psycopg 3 connection factory (autocommit on by default)

The extension must be installed in the system PostgreSQL (`make install`;
`make test` does it). Set LONNYMQ_KEEP_CLUSTER=1 to keep the cluster directory
after the run (its path and log are printed).
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from lonnymq_dev.invariants import assert_nothing_below_the_marks
from lonnymq_dev.pgcluster import Cluster, ClusterError

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def control_default_version() -> str:
    """default_version of lonnymq.control: the version make builds."""
    text = (REPO_ROOT / "lonnymq.control").read_text()
    m = re.search(r"^\s*default_version\s*=\s*'([^']+)'", text, re.M)
    assert m, "no default_version in lonnymq.control"
    return m.group(1)


DEFAULT_VERSION = control_default_version()

# Every released version and the fingerprint of its schema as its release
# installed it (upgrade/released_schemas.txt, test_upgrade_released.py), in
# release order; and the release before the version being built.
RELEASED = dict(
    line.split()
    for line in (REPO_ROOT / "test" / "python" / "upgrade" / "released_schemas.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)
PREVIOUS_RELEASE = [v for v in RELEASED if v != DEFAULT_VERSION][-1]

# Functions documented on another function's page.
DOC_PAGES = {"channel_resume": "channel_pause", "schedule_drop": "schedule_set",
             "revoke_access": "grant_access", "topic_unbind": "topic_bind", "topic_routes": "topic_bind",
             "message_publish_batch": "message_publish", "metrics_text": "metrics"}


def documented_sqlstates(function: str) -> set[str]:
    """The SQLSTATEs that the Errors table of a public function's doc page lists;
    none for a page without an Errors section (channel_stats: "it raises no error")."""
    text = (REPO_ROOT / "doc" / f"{DOC_PAGES.get(function, function)}.md").read_text()
    if "\n## Errors" not in text:
        return set()
    errors = text.split("\n## Errors", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([0-9A-Z]{5})` \|", errors, re.M))

# message_complete_dequeue's NOTICE for a complete it refused; its detail
# is "id=<id> num_attempts=<token>".
REFUSED_COMPLETE = "01LQ1"


def collect_refused(conn) -> list[int]:
    """The ids message_complete_dequeue reports not completed on conn,
    appended as the notices arrive (read in the handler: psycopg frees a
    Diagnostic after it returns)."""
    ids: list[int] = []

    def handler(diag) -> None:
        if diag.sqlstate == REFUSED_COMPLETE:
            ids.append(int(diag.message_detail.split()[0].removeprefix("id=")))

    conn.add_notice_handler(handler)
    return ids


TEMPLATE_DB = "lonnymq_template"
TEMPLATE_EXTENSIONS = ("pgtap", "lonnymq")

_db_counter = itertools.count(1)


def _raise_keyboard_interrupt(signum, frame):  # pragma: no cover - signal path
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    # SIGTERM / SIGHUP: unwind like Ctrl-C so fixtures tear the cluster down.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, _raise_keyboard_interrupt)
        except (ValueError, OSError):  # not the main thread
            pass


class Database:
    """One database of the test cluster."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self._connections: list = []

    @property
    def dsn(self) -> str:
        return self.cluster.dsn(self.name)

    def connect(self, autocommit: bool = True, **kwargs):
        """A new psycopg 3 connection to this database (closed at teardown)."""
        import psycopg

        conn = psycopg.connect(self.dsn, autocommit=autocommit, **kwargs)
        self._connections.append(conn)
        return conn

    def call(self, sql: str, params=(), *, lock_timeout: str = "10s") -> list:
        """One statement on a fresh autocommit connection that gives up (55P03)
        rather than wait longer than lock_timeout for a lock; returns its rows."""
        with self.connect() as conn:
            conn.execute(f"SET lock_timeout = '{lock_timeout}'")
            return conn.execute(sql, params).fetchall()

    def psql(self, sql: str, **kwargs) -> str:
        return self.cluster.psql(sql, dbname=self.name, **kwargs)

    def close(self) -> None:
        for conn in self._connections:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
        self._connections.clear()

    def __repr__(self) -> str:
        return f"<Database {self.name} on {self.cluster!r}>"


def _new_database(cluster: Cluster, template: str, hint: str) -> Database:
    slug = re.sub(r"[^a-z0-9]+", "_", hint.lower()).strip("_")
    name = f"t{next(_db_counter)}_{slug}"[:63]
    cluster.create_database(name, template=template)
    return Database(cluster, name)


def _drop(database: Database) -> None:
    database.close()
    try:
        database.cluster.drop_database(database.name)
    except ClusterError:
        pass


@pytest.fixture(scope="session")
def cluster():
    keep = os.environ.get("LONNYMQ_KEEP_CLUSTER") == "1"
    c = Cluster(keep=keep)
    try:
        c.start()
        yield c
    finally:
        c.cleanup()
        if keep:
            print(f"\nkept cluster: {c.base_dir} (log {c.log_path})", file=sys.stderr)


@pytest.fixture(scope="session")
def template_db(cluster) -> str:
    try:
        cluster.create_database(TEMPLATE_DB, extensions=TEMPLATE_EXTENSIONS)
    except ClusterError as exc:
        pytest.fail(
            f"cannot create {TEMPLATE_DB} with extensions {TEMPLATE_EXTENSIONS}; is the extension "
            f"installed (make install) and pgTAP present (make deps)?\n{exc}",
            pytrace=False,
        )
    return TEMPLATE_DB


def _check_the_marks(database: Database, request) -> None:
    """The marks' invariant (lonnymq_dev/invariants.py), checked when a test
    is done with its database, once its connections are closed: no message
    lies below a mark, where nothing would ever deliver it."""
    import psycopg

    database.close()
    with psycopg.connect(database.dsn, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('lonnymq.position_mark_seq') IS NOT NULL").fetchone()[0]:
            assert_nothing_below_the_marks(conn, f"when {request.node.name} was done with {database.name}")


@pytest.fixture
def db(cluster, template_db, request) -> Database:
    database = _new_database(cluster, template_db, request.node.name)
    try:
        yield database
        _check_the_marks(database, request)
    finally:
        _drop(database)


@pytest.fixture(scope="module")
def module_db(cluster, template_db, request) -> Database:
    database = _new_database(cluster, template_db, request.module.__name__)
    try:
        yield database
        _check_the_marks(database, request)
    finally:
        _drop(database)


@pytest.fixture
def connect(db):
    return db.connect


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and "cluster" in getattr(item, "fixturenames", ()):
        c = item.funcargs.get("cluster") if hasattr(item, "funcargs") else None
        if isinstance(c, Cluster):
            report.sections.append((f"postgres log tail ({c.log_path})", c.log_tail(4000)))
    return report
