"""Every way a user installs lonnymq, as a role that is not superuser (issue 39).

- The extension (files + CREATE EXTENSION), by the owner of a database
  without superuser: lonnymq.control says superuser = false.
- The SQL-only scripts (sql/sql-only/, tools/build_sql_only.py), run with
  psql -f by the owner of a database: what a managed service without custom
  extensions allows.  Their upgrade from the previous release equals a fresh
  install, and pg_dump / pg_restore by that owner keeps every message, key
  and schedule.
- Wrong environments are refused with a message that says what to do, and
  leave nothing behind.

On each install, the producer, consumer, monitor and admin sets are granted
by the owner to other roles, which then deliver messages exactly once and
may execute exactly what doc/README.md's Privileges table says.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import psycopg
import pytest

from conftest import DEFAULT_VERSION, PREVIOUS_RELEASE, REPO_ROOT
from lonnymq_dev import pgservers
from lonnymq_dev.calls import complete_dequeue
from lonnymq_dev.invariants import assert_nothing_below_the_marks
from lonnymq_dev.pgcluster import Cluster
from test_security import assert_privilege_matrix
from upgrade import schema

SQL_ONLY = REPO_ROOT / "sql" / "sql-only"
WORKERS = 3
MESSAGES = 240


class OwnedDatabase:
    """A database owned by a login role that is neither superuser nor CREATEROLE,
    and four login roles for the access sets (made by the superuser, as an
    administrator of a managed service makes them)."""

    def __init__(self, cluster):
        self.cluster = cluster
        suffix = uuid.uuid4().hex[:8]
        self.owner = f"lmq_owner_{suffix}"
        self.roles = {s: f"lmq_{s}_{suffix}" for s in ("producer", "consumer", "monitor", "admin")}
        self.databases: list[str] = []
        cluster.psql(f'CREATE ROLE "{self.owner}" LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB')
        for role in self.roles.values():
            cluster.psql(f'CREATE ROLE "{role}" LOGIN')

    def database(self) -> str:
        name = f"owned_{uuid.uuid4().hex[:10]}"
        self.cluster.psql(f'CREATE DATABASE "{name}" OWNER "{self.owner}"')
        self.databases.append(name)
        return name

    def connect(self, dbname: str, role: str | None = None) -> psycopg.Connection:
        return psycopg.connect(self.cluster.dsn(dbname, user=role or self.owner), autocommit=True)

    def psql_file(self, dbname: str, path: Path) -> subprocess.CompletedProcess:
        """psql -f as the owner, stopping at the first error, SQLSTATEs shown."""
        return subprocess.run(
            [str(self.cluster.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose",
             *self.cluster.client_args(dbname, self.owner), "-f", str(path)],
            env=self.cluster.client_env(), capture_output=True, text=True, timeout=300)

    def close(self) -> None:
        for name in self.databases:
            self.cluster.drop_database(name)
        for role in [*self.roles.values(), self.owner]:
            self.cluster.psql(f'DROP ROLE IF EXISTS "{role}"')


@pytest.fixture
def owned(cluster):
    o = OwnedDatabase(cluster)
    yield o
    o.close()


def _schema_objects(owned: OwnedDatabase, dbname: str) -> list[tuple]:
    with owned.connect(dbname) as conn:
        return conn.execute(
            "SELECT c.relname FROM pg_class AS c WHERE c.relnamespace = to_regnamespace('lonnymq')"
            " UNION ALL SELECT p.proname FROM pg_proc AS p WHERE p.pronamespace = to_regnamespace('lonnymq')"
            " ORDER BY 1").fetchall()


def _grant_sets(owned: OwnedDatabase, dbname: str) -> None:
    with owned.connect(dbname) as conn:
        for access, role in owned.roles.items():
            conn.execute("SELECT lonnymq.grant_access(%s, %s)", (role, access))


def _deliver_exactly_once(owned: OwnedDatabase, dbname: str) -> None:
    """The producer role creates MESSAGES in four channels; WORKERS consumer
    connections complete them with message_complete_dequeue: each once."""
    with owned.connect(dbname, owned.roles["producer"]) as conn:
        for c in range(4):
            conn.execute("SELECT count(*) FROM lonnymq.message_create_batch(%s, %s::bytea[])",
                         (f"ch{c}", [f"{c}-{i}".encode() for i in range(MESSAGES // 4)]))
    delivered: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work() -> None:
        try:
            with owned.connect(dbname, owned.roles["consumer"]) as conn:
                got = complete_dequeue(conn, None, limit=5)
                while got:
                    with lock:
                        delivered.extend(g[0] for g in got)
                    got = complete_dequeue(conn, got, limit=5)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(delivered) == MESSAGES and len(set(delivered)) == MESSAGES, (
        f"{len(delivered)} deliveries of {len(set(delivered))} messages, {MESSAGES} created")
    with owned.connect(dbname, owned.roles["admin"]) as conn:
        assert conn.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0] == 0
    with owned.connect(dbname) as conn:  # the marks are sequences, which only the owner reads
        assert_nothing_below_the_marks(conn, "after the workers")
    with owned.connect(dbname, owned.roles["monitor"]) as conn:
        assert conn.execute("SELECT count(*) FROM lonnymq.metrics").fetchone()[0] > 0


def _privilege_matrix(owned: OwnedDatabase, dbname: str) -> None:
    """Each set's role may execute exactly the documented functions; PUBLIC none."""
    with owned.connect(dbname) as conn:
        assert_privilege_matrix(conn, owned.roles, ["public"])


def test_the_control_file_asks_no_superuser():
    control = (REPO_ROOT / "lonnymq.control").read_text()
    assert "superuser = false" in control
    assert "trusted = false" in control  # why: doc/README.md, Privileges


def test_a_database_owner_installs_the_extension_without_superuser(owned):
    db = owned.database()
    with owned.connect(db) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0] is False
        conn.execute("CREATE EXTENSION lonnymq")
        assert conn.execute("SELECT pg_get_userbyid(extowner) FROM pg_extension WHERE extname = 'lonnymq'"
                            ).fetchone()[0] == owned.owner
    _grant_sets(owned, db)
    _deliver_exactly_once(owned, db)
    _privilege_matrix(owned, db)


def test_a_dump_of_an_owner_installed_extension_restores_as_a_superuser(owned, tmp_path):
    """pg_dump makes the schema and gives it to the owner before CREATE
    EXTENSION: a restore by a superuser (pg_dumpall | psql, an RDS master
    user) passes the install's schema check and keeps the queue and grants."""
    db = owned.database()
    with owned.connect(db) as conn:
        conn.execute("CREATE EXTENSION lonnymq")
    _grant_sets(owned, db)
    with owned.connect(db, owned.roles["producer"]) as conn:
        conn.execute("SELECT lonnymq.message_create('kept', 'across the dump')")
    dump = tmp_path / "owner.dump"
    cluster = owned.cluster
    subprocess.run([str(cluster.bindir / "pg_dump"), "-Fc", "-f", str(dump), *cluster.client_args(db)],
                   check=True, env=cluster.client_env(), capture_output=True)
    restored = owned.database()
    proc = subprocess.run([str(cluster.bindir / "pg_restore"), "--exit-on-error", *cluster.client_args(restored),
                           str(dump)], env=cluster.client_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with owned.connect(restored, owned.roles["consumer"]) as conn:
        got = complete_dequeue(conn, None, channel="kept", columns="id, num_attempts, content")
        assert [bytes(g[2]) for g in got] == [b"across the dump"]


def test_the_sql_only_install_as_a_database_owner(owned):
    db = owned.database()
    proc = owned.psql_file(db, SQL_ONLY / f"lonnymq-{DEFAULT_VERSION}.sql")
    assert proc.returncode == 0, proc.stderr
    with owned.connect(db) as conn:
        assert conn.execute("SELECT obj_description('lonnymq'::regnamespace, 'pg_namespace')").fetchone()[0] == (
            f"lonnymq {DEFAULT_VERSION} (SQL-only)")
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'lonnymq'").fetchone()[0] == 0
        # The entry points run with their planner settings, as in the extension.
        unset = conn.execute(
            "SELECT array_agg(proname) FROM pg_proc WHERE pronamespace = 'lonnymq'::regnamespace AND prosecdef"
            " AND NOT proconfig @> ARRAY['enable_seqscan=off', 'plan_cache_mode=force_generic_plan']").fetchone()[0]
        assert unset is None, f"entry points without their settings: {unset}"
    _grant_sets(owned, db)
    _deliver_exactly_once(owned, db)
    _privilege_matrix(owned, db)


def test_the_sql_only_upgrade_from_the_previous_release_equals_a_fresh_install(owned, tmp_path):
    previous = PREVIOUS_RELEASE
    old = tmp_path / f"lonnymq-{previous}.sql"
    subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "build_sql_only.py"), "--install", previous, str(old)],
                   check=True, cwd=REPO_ROOT / "tools")
    upgraded, fresh = owned.database(), owned.database()
    assert owned.psql_file(upgraded, old).returncode == 0
    _grant_sets(owned, upgraded)
    with owned.connect(upgraded, owned.roles["producer"]) as conn:
        conn.execute("SELECT lonnymq.message_create('kept', 'before the upgrade')")
    proc = owned.psql_file(upgraded, SQL_ONLY / f"lonnymq-{previous}--{DEFAULT_VERSION}.sql")
    assert proc.returncode == 0, proc.stderr
    assert owned.psql_file(fresh, SQL_ONLY / f"lonnymq-{DEFAULT_VERSION}.sql").returncode == 0
    _grant_sets(owned, fresh)
    a = schema.normalise(schema.dump_schema(owned.cluster, upgraded))
    b = schema.normalise(schema.dump_schema(owned.cluster, fresh))
    assert a == b, schema.unified_diff(a, b, f"SQL-only {previous} upgraded", f"SQL-only {DEFAULT_VERSION}")
    with owned.connect(upgraded, owned.roles["consumer"]) as conn:
        got = complete_dequeue(conn, None, channel="kept", columns="id, num_attempts, content")
        assert [bytes(g[2]) for g in got] == [b"before the upgrade"]


def test_pg_dump_and_restore_of_a_sql_only_install_keep_messages_keys_and_schedules(owned, tmp_path):
    db = owned.database()
    assert owned.psql_file(db, SQL_ONLY / f"lonnymq-{DEFAULT_VERSION}.sql").returncode == 0
    _grant_sets(owned, db)
    with owned.connect(db) as conn:
        conn.execute("SELECT lonnymq.channel_set('limited', 1)")
        conn.execute("SELECT lonnymq.message_create('plain', 'ready')")
        conn.execute("SELECT lonnymq.message_create('plain', 'later', lonnymq.to_epoch(now()) + 3600000)")
        conn.execute("SELECT lonnymq.message_create('keyed', 'once', NULL, 'order-1001')")
        conn.execute("SELECT lonnymq.message_create('limited', 'a'), lonnymq.message_create('limited', 'b')")
        conn.execute("SELECT lonnymq.schedule_set('nightly', 'reports', 'run', 86400000)")
        locked = complete_dequeue(conn, None, lock_ms=3600000, channel="limited")
        assert len(locked) == 1

        def state(c):
            return {
                "message": c.execute("SELECT id, channel, content, dequeue_at, is_locked, num_attempts"
                                     " FROM lonnymq.message ORDER BY id").fetchall(),
                "message_key": c.execute("SELECT key, message_id FROM lonnymq.message_key ORDER BY 1").fetchall(),
                "schedule": c.execute("SELECT name, channel, content, every_ms, next_at FROM lonnymq.schedule").fetchall(),
                "channel": c.execute("SELECT name, max_concurrency, num_admitted FROM lonnymq.channel").fetchall(),
                "message_id_seq": c.execute("SELECT last_value FROM lonnymq.message_id_seq").fetchone(),
            }

        before = state(conn)
    assert before["message_key"] and before["schedule"]
    dump = tmp_path / "sql-only.dump"
    subprocess.run([str(owned.cluster.bindir / "pg_dump"), "-Fc", "-f", str(dump),
                    *owned.cluster.client_args(db, owned.owner)],
                   check=True, env=owned.cluster.client_env(), capture_output=True)
    restored = owned.database()
    proc = subprocess.run([str(owned.cluster.bindir / "pg_restore"), "--exit-on-error", "--no-owner",
                           *owned.cluster.client_args(restored, owned.owner), str(dump)], env=owned.cluster.client_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with owned.connect(restored) as conn:
        assert state(conn) == before
        assert conn.execute("SELECT obj_description('lonnymq'::regnamespace, 'pg_namespace')").fetchone()[0] == (
            f"lonnymq {DEFAULT_VERSION} (SQL-only)")
        assert_nothing_below_the_marks(conn, "after the restore")
    # The grants came back with it, and the queue works on.
    with owned.connect(restored, owned.roles["consumer"]) as conn:
        got = complete_dequeue(conn, None, limit=10, columns="id, num_attempts, content")
        # the schedule, due since its creation, is materialised by the dequeue
        assert sorted(bytes(g[2]) for g in got) == [b"once", b"ready", b"run"]
    with owned.connect(restored) as conn:  # the lock came back with its token and its holder
        assert conn.execute("SELECT lonnymq.message_complete(%s, %s)", locked[0][:2]).fetchone()[0] is True


# ---------------------------------------------------------------- wrong environments


def _refused(proc: subprocess.CompletedProcess, sqlstate: str, hint: str) -> None:
    assert proc.returncode != 0, "the script should have been refused"
    assert f"ERROR:  {sqlstate}:" in proc.stderr, proc.stderr
    assert hint in proc.stderr, proc.stderr


def test_the_sql_only_install_refuses_a_schema_lonnymq_that_exists(owned):
    db = owned.database()
    with owned.connect(db) as conn:
        conn.execute("CREATE SCHEMA lonnymq")
        conn.execute("CREATE TABLE lonnymq.mine (x int)")
    before = _schema_objects(owned, db)
    _refused(owned.psql_file(db, SQL_ONLY / f"lonnymq-{DEFAULT_VERSION}.sql"), "42P06",
             "It is not lonnymq's: rename or drop that schema first")
    assert _schema_objects(owned, db) == before == [("mine",)]

    other = owned.database()
    with owned.connect(other) as conn:
        conn.execute("CREATE EXTENSION lonnymq")
    before = _schema_objects(owned, other)
    _refused(owned.psql_file(other, SQL_ONLY / f"lonnymq-{DEFAULT_VERSION}.sql"), "42P06",
             "lonnymq is installed as an extension: upgrade it with ALTER EXTENSION lonnymq UPDATE")
    assert _schema_objects(owned, other) == before

    again = owned.database()
    assert owned.psql_file(again, SQL_ONLY / f"lonnymq-{DEFAULT_VERSION}.sql").returncode == 0
    before = _schema_objects(owned, again)
    _refused(owned.psql_file(again, SQL_ONLY / f"lonnymq-{DEFAULT_VERSION}.sql"), "42P06",
             f"lonnymq {DEFAULT_VERSION} is installed already")
    assert _schema_objects(owned, again) == before


def test_create_extension_refuses_a_schema_lonnymq_that_is_not_its_own(owned, cluster):
    """CREATE EXTENSION would take an existing schema lonnymq as it is: the
    install script refuses one that holds objects or that another role owns."""
    db = owned.database()
    with owned.connect(db) as conn:
        conn.execute("CREATE SCHEMA lonnymq")
        conn.execute("CREATE FUNCTION lonnymq._channel_id(text) RETURNS bigint LANGUAGE sql AS 'SELECT 1'")
        with pytest.raises(psycopg.errors.DuplicateSchema) as info:
            conn.execute("CREATE EXTENSION lonnymq")
        assert "lonnymq installs into a schema of its own" in str(info.value)
        assert "nothing was installed" in info.value.diag.message_hint
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'lonnymq'").fetchone()[0] == 0
    assert _schema_objects(owned, db) == [("_channel_id",)]

    other = owned.database()
    cluster.psql("CREATE SCHEMA lonnymq", dbname=other)  # empty, but the superuser's
    with owned.connect(other) as conn:
        with pytest.raises(psycopg.errors.DuplicateSchema):
            conn.execute("CREATE EXTENSION lonnymq")
    cluster.psql("DROP SCHEMA lonnymq", dbname=other)
    with owned.connect(other) as conn:
        conn.execute("CREATE SCHEMA lonnymq")
        conn.execute(f'GRANT CREATE ON SCHEMA lonnymq TO "{owned.roles["producer"]}"')
        with pytest.raises(psycopg.errors.DuplicateSchema) as info:  # others may create in it
            conn.execute("CREATE EXTENSION lonnymq")
        assert "other roles may create in it" in str(info.value)
        conn.execute(f'REVOKE CREATE ON SCHEMA lonnymq FROM "{owned.roles["producer"]}"')
        # empty, the installer's and closed: taken
        conn.execute("CREATE EXTENSION lonnymq")


def test_a_sql_only_upgrade_refuses_the_wrong_installed_version(owned):
    previous = PREVIOUS_RELEASE
    upgrade = SQL_ONLY / f"lonnymq-{previous}--{DEFAULT_VERSION}.sql"
    current = owned.database()
    assert owned.psql_file(current, SQL_ONLY / f"lonnymq-{DEFAULT_VERSION}.sql").returncode == 0
    before = _schema_objects(owned, current)
    _refused(owned.psql_file(current, upgrade), "55000",
             "Run the upgrade scripts from the installed version on")
    assert _schema_objects(owned, current) == before
    with owned.connect(current) as conn:
        assert conn.execute("SELECT obj_description('lonnymq'::regnamespace, 'pg_namespace')").fetchone()[0] == (
            f"lonnymq {DEFAULT_VERSION} (SQL-only)")

    empty = owned.database()
    _refused(owned.psql_file(empty, upgrade), "55000", f"Install it with lonnymq-{DEFAULT_VERSION}.sql instead")
    assert _schema_objects(owned, empty) == []


def test_an_unsupported_major_is_refused_by_both_install_paths():
    """PostgreSQL 13 (a build of the server only, lonnymq's files copied into
    its extension directory as make install would): CREATE EXTENSION and the
    SQL-only script each fail with 0A000 and a hint, and leave no schema."""
    root = pgservers.unsupported_server(13)
    extdir = root / "share" / "postgresql" / "extension"
    for f in [REPO_ROOT / "lonnymq.control", REPO_ROOT / "sql" / f"lonnymq--{DEFAULT_VERSION}.sql"]:
        shutil.copy(f, extdir / f.name)
    with Cluster(bindir=root / "bin", fsync=False) as old:
        assert old.major == 13
        old.psql("CREATE DATABASE shop")
        with psycopg.connect(old.dsn("shop"), autocommit=True) as conn:
            with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
                conn.execute("CREATE EXTENSION lonnymq")
            assert "lonnymq supports PostgreSQL 14 to 18; this server is 13." in str(info.value)
            assert "nothing was changed" in info.value.diag.message_hint
            # The SQL-only script has no psql meta-command: a driver runs it as it is.
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                conn.execute((SQL_ONLY / f"lonnymq-{DEFAULT_VERSION}.sql").read_text())
            conn.execute("ROLLBACK")  # the script's own transaction, aborted
            assert conn.execute("SELECT to_regnamespace('lonnymq')").fetchone()[0] is None
