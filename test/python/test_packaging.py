"""make dist: a PGXN distribution that installs every version."""

from __future__ import annotations

import json
import subprocess
import zipfile

from conftest import DEFAULT_VERSION, REPO_ROOT


def test_make_dist_holds_every_script_the_docs_and_no_benchmark_reports(tmp_path):
    version = DEFAULT_VERSION
    zip_path = REPO_ROOT / f"lonnymq-{version}.zip"
    subprocess.run(["make", "--no-print-directory", "dist"], cwd=REPO_ROOT, check=True, capture_output=True)
    try:
        names = set(zipfile.ZipFile(zip_path).namelist())
        meta = json.loads(zipfile.ZipFile(zip_path).read(f"lonnymq-{version}/META.json"))
    finally:
        zip_path.unlink()
    top = f"lonnymq-{version}/"
    assert all(n.startswith(top) for n in names)
    # The built install script (not committed) and every committed script.
    committed = subprocess.run(["git", "ls-files", "sql/*.sql"], cwd=REPO_ROOT, check=True,
                               capture_output=True, text=True).stdout.split()
    assert f"sql/lonnymq--{version}.sql" not in committed
    for script in [*committed, f"sql/lonnymq--{version}.sql", "lonnymq.control", "Makefile"]:
        assert top + script in names, script
    assert top + meta["provides"]["lonnymq"]["file"] in names
    # The SQL-only install of this version and an SQL-only upgrade per extension
    # upgrade to 0.14.0 (the first SQL-only release) and on; pg_tle's registration.
    sql_only = {n.removeprefix(top + "sql/sql-only/") for n in names if n.startswith(top + "sql/sql-only/lonnymq-")}
    upgrades = {f"lonnymq-{s.removeprefix('sql/lonnymq--')}" for s in committed if s.count("--") == 2
                if tuple(map(int, s.rsplit("--", 1)[1].removesuffix(".sql").split("."))) >= (0, 14, 0)}
    assert upgrades and sql_only == {f"lonnymq-{version}.sql"} | upgrades, sorted(sql_only)
    assert top + "sql/pg_tle/lonnymq-pg_tle.sql" in names
    assert meta["version"] == version
    # What a PGXN user reads before installing or upgrading.
    for doc in ("README.md", "UPGRADING.md", "CHANGELOG.md", "doc/README.md"):
        assert top + doc in names, doc
    assert not [n for n in names if n.startswith(top + "bench/results/") and not n.endswith("/")]
