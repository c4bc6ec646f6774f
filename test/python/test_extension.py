"""Packaging checks of the installed extension (independent of its contents)."""

from __future__ import annotations

from conftest import DEFAULT_VERSION, REPO_ROOT


def test_installed_version_matches_control(db):
    row = db.psql(
        "SELECT e.extversion || ' ' || n.nspname FROM pg_extension AS e "
        "JOIN pg_namespace AS n ON n.oid = e.extnamespace WHERE e.extname = 'lonnymq'"
    )
    assert row == f"{DEFAULT_VERSION} lonnymq"


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
    script = REPO_ROOT / "sql" / f"lonnymq--{DEFAULT_VERSION}.sql"
    before = db.psql("SELECT count(*) FROM pg_proc")
    out = cluster.psql(f"\\i '{script}'", dbname=db.name)
    assert out == 'Use "CREATE EXTENSION lonnymq" to load this file.'
    assert db.psql("SELECT count(*) FROM pg_proc") == before
