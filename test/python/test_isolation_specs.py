"""The races replayed as isolationtester specs (test/isolation/): each spec
names its sessions and steps, and its permutations fix the interleaving, a
step that waits for a lock shown as waiting; what every step returns is
compared with expected/<spec>.out by pg_isolation_regress.  After every
permutation the teardown checks the marks' invariant (lonnymq_dev/
invariants.py, installed as lonnymq_check.below_the_marks()).

The specs run on the cluster of the PG_CONFIG's major (make test runs this
file on every supported one), with that build's own pg_isolation_regress
and isolationtester, from `pg_config --pgxs`'s tree (Debian's
postgresql-client-15 ships them there; the pinned builds of 14, 16, 17 and
18 carry them too).  A build without them falls back to Debian's 15, a
libpq client that drives any server of 14 to 18 (--use-existing).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from lonnymq_dev.invariants import check_function_sql

ISOLATION_DIR = REPO_ROOT / "test" / "isolation"
SCHEDULE = ISOLATION_DIR / "schedule"
DEBIAN_15_TOOL = Path("/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/pg_isolation_regress")
TIMEOUT_S = 600


def pg_isolation_regress() -> Path:
    """The PG_CONFIG build's pg_isolation_regress, else Debian's 15."""
    pg_config = os.environ.get("PG_CONFIG") or "pg_config"
    pgxs = subprocess.run([pg_config, "--pgxs"], capture_output=True, text=True, check=True).stdout.strip()
    # pgxs is <pkglibdir>/pgxs/src/makefiles/pgxs.mk
    own = Path(pgxs).parent.parent / "test" / "isolation" / "pg_isolation_regress"
    for tool in (own, DEBIAN_15_TOOL):
        if tool.exists() and (tool.parent / "isolationtester").exists():
            return tool
    pytest.fail(f"no pg_isolation_regress at {own} or {DEBIAN_15_TOOL}: install postgresql-client-15 (make deps)",
                pytrace=False)


def scheduled_specs() -> list[str]:
    return [name for line in SCHEDULE.read_text().splitlines()
            if line.startswith("test:") for name in line.split()[1:]]


def test_every_spec_is_scheduled_and_has_its_expected_output():
    specs = sorted(p.stem for p in (ISOLATION_DIR / "specs").glob("*.spec"))
    assert specs, "no specs in test/isolation/specs"
    assert sorted(scheduled_specs()) == specs, "test/isolation/schedule must list every spec, once"
    missing = [s for s in specs if not (ISOLATION_DIR / "expected" / f"{s}.out").exists()]
    assert not missing, f"specs without expected output: {missing}"


def test_isolation_specs(cluster, tmp_path):
    """pg_isolation_regress --use-existing over the schedule, in a database
    of its own: the specs drop and create the extension there (setup), so
    every permutation starts from a fresh install."""
    dbname = "lonnymq_isolation"
    cluster.drop_database(dbname)
    cluster.create_database(dbname, with_extension=False)
    cluster.psql(check_function_sql(), dbname=dbname)
    tool = pg_isolation_regress()
    cmd = [str(tool), "--use-existing", f"--host={cluster.socket_dir}", f"--port={cluster.port}",
           f"--user={cluster.superuser}", f"--dbname={dbname}", f"--inputdir={ISOLATION_DIR}",
           f"--outputdir={tmp_path}", f"--schedule={SCHEDULE}"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=cluster.client_env(), timeout=TIMEOUT_S, cwd=tmp_path)
    diffs = tmp_path / "regression.diffs"
    if proc.returncode != 0:
        pytest.fail(f"pg_isolation_regress failed (exit {proc.returncode}), PostgreSQL {cluster.major}, {tool}\n"
                    f"{proc.stdout}\n----- regression.diffs -----\n"
                    f"{diffs.read_text() if diffs.exists() else '(none)'}", pytrace=False)
    cluster.drop_database(dbname)
