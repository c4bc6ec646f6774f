#!/usr/bin/env python3
"""Build the SQL-only scripts: lonnymq without CREATE EXTENSION (issue 39).

For services that allow neither an extension's files nor a custom extension
(Cloud SQL, Azure, Neon, any role that is not superuser), the same objects are
installed by a plain script that the owner of a database runs:

    psql -v ON_ERROR_STOP=1 -d shop -f sql/sql-only/lonnymq-0.14.0.sql
    psql -v ON_ERROR_STOP=1 -d shop -f sql/sql-only/lonnymq-0.14.0--0.15.0.sql   # an upgrade

Each is made from the extension's own scripts (one source): the install from
sql/lonnymq--X.sql, an upgrade from sql/lonnymq--A--B.sql.  What only an
extension script may run is taken out (the \\echo guard, pg_extension_config_dump,
ALTER EXTENSION, the catalog update of the extension's initial privileges),
@extschema@ becomes lonnymq, and the whole runs in one transaction, after a
check that refuses a wrong installed version with a message that says what to
do (the scripts' own first statement refuses an unsupported server:
sql/src/install/check_server.sql).  The installed version is the schema's comment:

    SELECT obj_description('lonnymq'::regnamespace, 'pg_namespace');   -- lonnymq 0.14.0 (SQL-only)

No psql meta-command: any driver can run a script as one simple query.

    tools/build_sql_only.py OUTDIR VERSION           # OUTDIR/lonnymq-VERSION.sql and an
                                                     # OUTDIR/lonnymq-A--B.sql per extension upgrade
                                                     # to FIRST_SQL_ONLY (0.14.0) and on
    tools/build_sql_only.py --install VERSION FILE   # the install of any version, released
                                                     # ones from the base and the upgrades

Standard library only (make runs it before the virtualenv exists).
"""

from __future__ import annotations

import pathlib
import re
import sys

import sqlscript
from build_upgrade import BASE_VERSION, SQL, upgrade_path
from check_version import EXTENSION, control_version

SCHEMA = "lonnymq"
# The first release with SQL-only scripts: upgrades are made to it and on (the
# one to it serves a test: test_install_paths.py installs the previous
# release's SQL-only form with --install and upgrades it).
FIRST_SQL_ONLY = "0.14.0"

# Statements that only an extension script may run, or that only concern an extension.
_EXTENSION_ONLY = [
    re.compile(r"^SELECT\s+pg_catalog\.pg_extension_config_dump\s*\(", re.I),
    re.compile(r"^ALTER\s+EXTENSION\b", re.I),
    re.compile(r"^UPDATE\s+pg_catalog\.pg_init_privs\b", re.I),
]

_COMMENT = "lonnymq {version} (SQL-only)"

# What CREATE EXTENSION sets while its script runs: function bodies checked
# only when called (a body may name a function defined further on), the
# schema first on the search path, notices quiet.  SET LOCAL: until COMMIT.
_SETTINGS = f"""SET LOCAL check_function_bodies = false;
SET LOCAL search_path = {SCHEMA}, pg_temp;
SET LOCAL client_min_messages = warning;
"""

def _installed_check(expected: str | None, version: str) -> str:
    """A DO block that refuses to go on unless the installed lonnymq is
    `expected` (None: nothing may be installed)."""
    if expected is None:
        wrong = f"""        RAISE EXCEPTION 'schema {SCHEMA} already exists (%)', v_found
            USING ERRCODE = '42P06',
            HINT = CASE
                WHEN v_found LIKE 'the extension%' THEN 'lonnymq is installed as an extension: upgrade it with ALTER EXTENSION lonnymq UPDATE.'
                WHEN v_found = '{_COMMENT.format(version=version)}' THEN 'lonnymq {version} is installed already; nothing was changed.'
                WHEN v_found LIKE 'lonnymq %' THEN 'Upgrade it with the script lonnymq-<installed>--{version}.sql instead; nothing was changed.'
                ELSE 'It is not lonnymq''s: rename or drop that schema first; nothing was changed.'
            END;"""
        condition = "v_found IS NOT NULL"
    else:
        wrong = f"""        RAISE EXCEPTION 'this script upgrades lonnymq {expected} (SQL-only) to {version}; found %',
            COALESCE(v_found, 'no schema {SCHEMA}')
            USING ERRCODE = '55000',
            HINT = CASE
                WHEN v_found IS NULL THEN 'Install it with lonnymq-{version}.sql instead; nothing was changed.'
                WHEN v_found LIKE 'the extension%' THEN 'lonnymq is installed as an extension: upgrade it with ALTER EXTENSION lonnymq UPDATE.'
                ELSE 'Run the upgrade scripts from the installed version on, one after the other; nothing was changed.'
            END;"""
        condition = f"v_found IS DISTINCT FROM '{_COMMENT.format(version=expected)}'"
    return f"""DO $lonnymq_check$
DECLARE
    v_found text;
BEGIN
    SELECT CASE
        WHEN e.extversion IS NOT NULL THEN 'the extension lonnymq ' || e.extversion
        ELSE COALESCE(pg_catalog.obj_description(n.oid, 'pg_namespace'), 'a schema without lonnymq''s comment')
    END
    INTO v_found
    FROM pg_catalog.pg_namespace AS n
    LEFT JOIN pg_catalog.pg_extension AS e ON e.extname = '{EXTENSION}'
    WHERE n.nspname = '{SCHEMA}';
    IF {condition} THEN
{wrong}
    END IF;
END;
$lonnymq_check$;
"""


def plain(script: str) -> str:
    """An extension script as a plain one: extension-only statements out,
    @extschema@ -> lonnymq, the comments between statements kept."""
    out = []
    for statement in sqlscript.split(script):
        if statement.text.startswith("\\"):
            continue  # the \echo ... \quit guard
        if any(p.match(statement.text) for p in _EXTENSION_ONLY):
            continue
        out.append(statement.text)
    return "\n\n".join(out).replace("@extschema@", SCHEMA) + "\n"


def install_script(version: str, body: str) -> str:
    return (
        f"-- lonnymq {version}, SQL-only install: generated by tools/build_sql_only.py from the\n"
        f"-- extension's scripts. Run it as the owner of the database (no superuser needed):\n"
        f"--     psql -v ON_ERROR_STOP=1 -f lonnymq-{version}.sql\n"
        "-- One transaction: an error leaves nothing behind.\n"
        "BEGIN;\n\n"
        + _SETTINGS + "\n"
        + _installed_check(None, version) + "\n"
        + f"CREATE SCHEMA {SCHEMA};\n\n"
        + plain(body)
        + f"\nCOMMENT ON SCHEMA {SCHEMA} IS '{_COMMENT.format(version=version)}';\n\nCOMMIT;\n"
    )


def upgrade_script(old: str, new: str, body: str) -> str:
    return (
        f"-- lonnymq {old} -> {new}, SQL-only upgrade: generated by tools/build_sql_only.py from\n"
        f"-- sql/{EXTENSION}--{old}--{new}.sql. Run it as the owner of the schema lonnymq:\n"
        f"--     psql -v ON_ERROR_STOP=1 -f lonnymq-{old}--{new}.sql\n"
        "-- One transaction: an error leaves everything as it was.\n"
        "BEGIN;\n\n"
        + _SETTINGS + "\n"
        + _installed_check(old, new) + "\n"
        + plain(body)
        + f"\nCOMMENT ON SCHEMA {SCHEMA} IS '{_COMMENT.format(version=new)}';\n\nCOMMIT;\n"
    )


def upgrade_steps(current: str) -> list[tuple[str, str, pathlib.Path]]:
    """The extension's upgrade scripts from the base to `current`, in order:
    (from-version, to-version, script)."""
    steps = []
    for path in upgrade_path(EXTENSION, BASE_VERSION, current):
        old, new = re.fullmatch(rf"{EXTENSION}--(.+)--(.+)\.sql", path.name).groups()
        steps.append((old, new, path))
    return steps


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def install_body(version: str, current: str) -> str:
    """The extension's install of `version`: the built script of the current
    version, else the base and the upgrades to `version`, as CREATE
    EXTENSION VERSION runs them."""
    if version == current:
        return (SQL / f"{EXTENSION}--{version}.sql").read_text()
    chain = [SQL / f"{EXTENSION}--{BASE_VERSION}.sql", *upgrade_path(EXTENSION, BASE_VERSION, version)]
    return "\n".join(p.read_text() for p in chain)


def write_if_changed(path: pathlib.Path, content: str) -> bool:
    """Write content unless the file holds it already (its mtime then stays)."""
    if path.exists() and path.read_text() == content:
        return False
    path.write_text(content)
    return True


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--install":
        version, out = argv[2], pathlib.Path(argv[3])
        current = control_version()
        out.write_text(install_script(version, install_body(version, current)))
        return 0
    if len(argv) != 3:
        print(__doc__.split("\n\n")[-2], file=sys.stderr)
        return 2
    outdir, current = pathlib.Path(argv[1]), argv[2]
    outdir.mkdir(parents=True, exist_ok=True)
    wanted = {f"lonnymq-{current}.sql": install_script(current, install_body(current, current))}
    for old, new, path in upgrade_steps(current):
        if _version_key(new) >= _version_key(FIRST_SQL_ONLY):
            wanted[f"lonnymq-{old}--{new}.sql"] = upgrade_script(old, new, path.read_text())
    changed = [name for name, content in sorted(wanted.items()) if write_if_changed(outdir / name, content)]
    for stale in outdir.glob("lonnymq-*.sql"):
        if stale.name not in wanted:
            stale.unlink()
    if changed:
        print(f"built {len(changed)} SQL-only script(s) in {outdir}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
