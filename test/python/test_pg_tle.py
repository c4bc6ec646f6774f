"""lonnymq through pg_tle (Trusted Language Extensions), as on Amazon RDS,
Aurora and Supabase: a role with pgtle_admin and no superuser registers every
version with sql/pg_tle/lonnymq-pg_tle.sql, then CREATE EXTENSION and ALTER
EXTENSION UPDATE work without a file of lonnymq's on the server.

pg_tle is built here from its source with PGXS against Debian's 15 and put in
a relocated copy of that server's tree, from which lonnymq's own files are
left out (pg_tle refuses a name that has a control file); the system's install
is not touched.  pg_tle's source is in none of the package registries these
machines reach (its home is GitHub; Debian, PyPI and npm do not carry it):
LONNYMQ_PG_TLE_SRC names a source tree to build (a checkout of
https://github.com/aws/pg_tle, 1.5.x); without it the module is skipped.
Building needs Debian's flex, bison and libkrb5-dev.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg
import pytest

from conftest import DEFAULT_VERSION, PREVIOUS_RELEASE, REPO_ROOT
from lonnymq_dev.calls import complete_dequeue
from lonnymq_dev.pgcluster import Cluster
from lonnymq_dev.pgservers import SYSTEM_MAJOR
from upgrade import schema

SOURCE = os.environ.get("LONNYMQ_PG_TLE_SRC")
REGISTER = REPO_ROOT / "sql" / "pg_tle" / "lonnymq-pg_tle.sql"
DEBIAN_BIN = Path(f"/usr/lib/postgresql/{SYSTEM_MAJOR}")
DEBIAN_SHARE = Path(f"/usr/share/postgresql/{SYSTEM_MAJOR}")

pytestmark = pytest.mark.skipif(
    not SOURCE,
    reason="pg_tle's source is in no package registry these machines reach: set LONNYMQ_PG_TLE_SRC "
           "to a pg_tle source tree (https://github.com/aws/pg_tle) to run these tests")


def _relocated_server_with_pg_tle(root: Path) -> Path:
    """Debian's server tree copied under root (the same layout, so that the
    binaries find their share directory relative to themselves), without
    lonnymq's files, with pg_tle built and added.  Returns its pg_config."""
    lib, share = root / "lib" / "postgresql" / str(SYSTEM_MAJOR), root / "share" / "postgresql" / str(SYSTEM_MAJOR)
    shutil.copytree(DEBIAN_BIN, lib, symlinks=True)
    shutil.copytree(DEBIAN_SHARE, share, symlinks=True)
    for f in (share / "extension").glob("lonnymq*"):
        f.unlink()
    src = root / "pg_tle-src"
    shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns("*.o", "*.bc", "*.so"))
    build = subprocess.run(["make", "-j2", f"PG_CONFIG={DEBIAN_BIN / 'bin' / 'pg_config'}"], cwd=src,
                           capture_output=True, text=True)
    assert build.returncode == 0, f"pg_tle did not build:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    shutil.copy(src / "pg_tle.so", lib / "lib" / "pg_tle.so")
    for f in [src / "pg_tle.control", *src.glob("pg_tle--*.sql")]:
        shutil.copy(f, share / "extension" / f.name)
    for p in [root, *root.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    return lib / "bin" / "pg_config"


@pytest.fixture(scope="module")
def tle():
    root = Path(tempfile.mkdtemp(prefix="lonnymq-pg_tle-", dir="/tmp"))
    root.chmod(0o755)
    try:
        pg_config = _relocated_server_with_pg_tle(root)
        with Cluster(pg_config=str(pg_config), settings={"shared_preload_libraries": "pg_tle"}) as cluster:
            assert not list((cluster.bindir.parent.parent.parent.parent / "share").rglob("lonnymq.control"))
            yield cluster
    finally:
        shutil.rmtree(root, ignore_errors=True)


class TleDatabase:
    """A database owned by a role that has pgtle_admin and is not superuser."""

    def __init__(self, cluster: Cluster, *, admin: bool = True, with_pg_tle: bool = True):
        self.cluster = cluster
        self.role = f"lmq_tle_{uuid.uuid4().hex[:8]}"
        self.name = f"tle_{uuid.uuid4().hex[:8]}"
        cluster.psql(f'CREATE ROLE "{self.role}" LOGIN NOSUPERUSER')
        cluster.psql(f'CREATE DATABASE "{self.name}" OWNER "{self.role}"')
        if with_pg_tle:
            cluster.psql("CREATE EXTENSION pg_tle", dbname=self.name)  # makes the role pgtle_admin
        if admin:
            cluster.psql(f'GRANT pgtle_admin TO "{self.role}"')

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.cluster.dsn(self.name, user=self.role), autocommit=True)

    def register(self) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.cluster.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose",
             *self.cluster.client_args(self.name, self.role), "-f", str(REGISTER)], env=self.cluster.client_env(), capture_output=True, text=True,
            timeout=300)


def test_a_pgtle_admin_registers_lonnymq_and_creates_it(tle):
    db = TleDatabase(tle)
    proc = db.register()
    assert proc.returncode == 0, proc.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0] is False
        conn.execute("CREATE EXTENSION lonnymq")
        assert conn.execute("SELECT extversion, extnamespace::regnamespace::text FROM pg_extension"
                            " WHERE extname = 'lonnymq'").fetchone() == (DEFAULT_VERSION, "lonnymq")
        ids = [conn.execute("SELECT lonnymq.message_create('tle', %s)", (f"m{i}".encode(),)).fetchone()[0]
               for i in range(20)]
        got, seen = complete_dequeue(conn, None, limit=7), []
        while got:
            seen += [g[0] for g in got]
            got = complete_dequeue(conn, got, limit=7)
        assert sorted(seen) == sorted(ids)
    # Run again (after a release, say): it registers what it did before, and
    # the installed extension stays.
    assert db.register().returncode == 0
    with db.connect() as conn:
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'lonnymq'").fetchone()[0] == (
            DEFAULT_VERSION)


def test_alter_extension_update_through_pg_tle_equals_a_fresh_install(tle):
    previous = PREVIOUS_RELEASE
    upgraded, fresh = TleDatabase(tle), TleDatabase(tle)
    for db in (upgraded, fresh):
        assert db.register().returncode == 0
    with upgraded.connect() as conn:
        conn.execute(f"CREATE EXTENSION lonnymq VERSION '{previous}'")
        conn.execute("SELECT lonnymq.message_create('kept', 'before the update')")
        conn.execute("ALTER EXTENSION lonnymq UPDATE")
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'lonnymq'").fetchone()[0] == (
            DEFAULT_VERSION)
        got = complete_dequeue(conn, None, channel="kept", columns="id, num_attempts, content")
        assert [bytes(g[2]) for g in got] == [b"before the update"]
    with fresh.connect() as conn:
        conn.execute("CREATE EXTENSION lonnymq")
    # (Each database has its own owner: named alike for the comparison.)
    a = schema.normalise(schema.dump_schema(tle, upgraded.name).replace(upgraded.role, "the_owner"))
    b = schema.normalise(schema.dump_schema(tle, fresh.name).replace(fresh.role, "the_owner"))
    assert a == b, schema.unified_diff(a, b, f"pg_tle {previous} updated", f"pg_tle {DEFAULT_VERSION}")


def test_registering_without_pgtle_admin_or_pg_tle_is_refused(tle):
    db = TleDatabase(tle, admin=False)
    proc = db.register()
    assert proc.returncode != 0 and "ERROR:  42501:" in proc.stderr, proc.stderr
    assert "GRANT pgtle_admin TO the role that registers lonnymq" in proc.stderr
    assert tle.psql("SELECT count(*) FROM pgtle.available_extensions() WHERE name = 'lonnymq'",
                    dbname=db.name) == "0"

    bare = TleDatabase(tle, with_pg_tle=False)
    proc = bare.register()
    assert proc.returncode != 0 and "ERROR:  55000:" in proc.stderr, proc.stderr
    assert "CREATE EXTENSION pg_tle" in proc.stderr
