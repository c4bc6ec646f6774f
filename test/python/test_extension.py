"""Packaging checks of the installed extension (independent of its contents)."""

from __future__ import annotations

import re

from conftest import REPO_ROOT


def _control_version() -> str:
    text = (REPO_ROOT / "lonnymq.control").read_text()
    return re.search(r"^\s*default_version\s*=\s*'([^']+)'", text, re.M).group(1)


def test_installed_version_matches_control(db):
    row = db.psql(
        "SELECT e.extversion || ' ' || n.nspname FROM pg_extension AS e "
        "JOIN pg_namespace AS n ON n.oid = e.extnamespace WHERE e.extname = 'lonnymq'"
    )
    assert row == f"{_control_version()} lonnymq"


def test_drop_and_recreate(db):
    db.psql("DROP EXTENSION lonnymq; CREATE EXTENSION lonnymq;")
    with db.connect() as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM pg_depend AS d JOIN pg_extension AS e ON e.oid = d.refobjid "
            "WHERE e.extname = 'lonnymq' AND d.deptype = 'e'"
        ).fetchone()
    assert n > 0


def test_script_refuses_to_run_in_psql(cluster, db):
    """The install script starts with the \\echo ... \\quit guard."""
    script = REPO_ROOT / "sql" / f"lonnymq--{_control_version()}.sql"
    before = db.psql("SELECT count(*) FROM pg_proc")
    out = cluster.psql(f"\\i '{script}'", dbname=db.name)
    assert out == 'Use "CREATE EXTENSION lonnymq" to load this file.'
    assert db.psql("SELECT count(*) FROM pg_proc") == before
