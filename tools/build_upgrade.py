#!/usr/bin/env python3
"""Build sql/lonnymq--A--B.sql, the upgrade script to the CURRENT version B.

Input: sql/upgrade/A--B.sql, the hand-written schema changes. Each line
"-- @include sql/src/schema/x.sql" is replaced by that file's text (new tables,
indexes, views: created exactly as a fresh install creates them; a view with
CREATE OR REPLACE VIEW, so that a changed one keeps its grants). Then every
function of sql/src/ follows as CREATE OR REPLACE FUNCTION, in the load order of
sql/src/MANIFEST.md (so every function
body equals the fresh install's), then the head's lines after a line
"-- @after functions" (views over new functions), every COMMENT ON of
sql/src/schema/, the
entry points' settings, and, when an access set changed or a function was
dropped, the recorded access grants are re-applied (functions with new
signatures, new functions in an access set).

Only what changes is written: a function, a comment or a REVOKE that
version A already has exactly so is left out.  Version A's functions are found by
replaying the committed scripts from the base install script
(sql/lonnymq--0.1.0.sql) through the upgrade scripts to A (tools/sqlscript.py).
Comments outside function bodies are left out too (they are in sql/src and
sql/upgrade).  So every release adds only its changes to the repository.

Only the upgrade to the current version is generated (by make); once the
version moves on, the script is committed and frozen like the base script.
The file is rewritten only when its content changes.

A function whose signature changes is dropped by the head ("DROP FUNCTION
name(old types)") and created again from sql/src/ under its new one. The
EXECUTE grants a user gave on the old signature directly (not through
grant_access, whose grants are applied again anyway) would be lost with it:
the script captures them before the head's first such DROP and gives them on
the new signatures after the functions (GRANT_CARRY_CAPTURE,
GRANT_CARRY_APPLY).

Last, the script forgets the role grants that ALTER EXTENSION recorded as
initial privileges (pg_init_privs) while the script re-applied them: pg_dump
dumps only privileges that differ from the initial ones, so it would drop
them (see INIT_PRIVS_FIX).
"""

from __future__ import annotations

import pathlib
import re
import sys

import manifest
import sqlscript

ROOT = pathlib.Path(__file__).resolve().parent.parent
SQL = ROOT / "sql"
# The one committed install script; every other version is reached from it
# through the committed upgrade scripts.
BASE_VERSION = "0.1.0"

# Found by test/python/test_upgrade.py: without it, pg_dump of an upgraded
# database loses every grant_access grant.
INIT_PRIVS_FIX = """
-- ALTER EXTENSION records every GRANT and REVOKE its script runs as the
-- objects' initial privileges (pg_init_privs), and pg_dump dumps only the
-- changes from those: the grants to roles made above (and kept by CREATE OR
-- REPLACE) would be left out of every dump.  Keep only the owner's and
-- PUBLIC's entries, as a fresh install records them.  Only a superuser may
-- change the catalog: an owner without superuser (superuser = false) updates
-- without it, and pg_dump then leaves out the grants this script re-applied
-- (doc/README.md, Privileges).
DO $lonnymq_init_privs$
BEGIN
    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) THEN
        UPDATE pg_catalog.pg_init_privs AS i
        SET initprivs = ARRAY(
            SELECT a
            FROM pg_catalog.unnest(i.initprivs) AS a
            WHERE NOT EXISTS (
                SELECT 1
                FROM pg_catalog.aclexplode(ARRAY[a]) AS x
                WHERE x.grantee NOT IN (0, e.extowner)
            )
        )
        FROM pg_catalog.pg_extension AS e
        WHERE
            e.extname = '{extension}'
            AND i.privtype = 'e'
            AND (
                (i.classoid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND i.objoid = e.extnamespace)
                OR EXISTS (
                    SELECT 1
                    FROM pg_catalog.pg_depend AS d
                    WHERE
                        d.classid = i.classoid AND d.objid = i.objoid AND d.deptype = 'e'
                        AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND d.refobjid = e.oid
                )
            );
    END IF;
END;
$lonnymq_init_privs$;
"""


# Captures the direct EXECUTE grants of the dropped signatures, each with the
# signature the sources give that function now, into a setting of this
# transaction (a table made here would become a member of the extension).
# {pairs}: a VALUES list of (old signature, new signature).
GRANT_CARRY_CAPTURE = """
-- The EXECUTE grants users gave on the signatures dropped below directly (not
-- through grant_access, whose grants are applied again at the end), kept
-- until the functions are created under their new signatures (generated:
-- tools/build_upgrade.py).
SELECT pg_catalog.set_config(
    'lonnymq.upgrade_grants',
    COALESCE(
        (
            SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(s.new_signature, x.grantee::regrole::text, x.is_grantable))
            FROM (
                VALUES
                {pairs}
            ) AS s (old_signature, new_signature)
            INNER JOIN pg_catalog.pg_proc AS p ON p.oid = pg_catalog.to_regprocedure('@extschema@.' || s.old_signature)
            CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) AS x
            WHERE x.privilege_type = 'EXECUTE' AND x.grantee <> 0 AND x.grantee <> p.proowner
        )::text,
        '[]'
    ),
    TRUE
);
"""

GRANT_CARRY_APPLY = """
-- The captured grants, on the new signatures.
DO $lonnymq_grants$
DECLARE
    v_grant jsonb;
BEGIN
    FOR v_grant IN
        SELECT g.value
        FROM pg_catalog.jsonb_array_elements(pg_catalog.current_setting('lonnymq.upgrade_grants')::jsonb) AS g
    LOOP
        EXECUTE pg_catalog.format(
            'GRANT EXECUTE ON FUNCTION @extschema@.%s TO %s%s',
            v_grant ->> 0, v_grant ->> 1, CASE WHEN (v_grant ->> 2)::boolean THEN ' WITH GRANT OPTION' ELSE '' END
        );
    END LOOP;
END;
$lonnymq_grants$;
"""

_DROP_LINE = re.compile(
    r"^\s*DROP\s+FUNCTION\s+(?:IF\s+EXISTS\s+)?@extschema@\.(\w+)\s*\(([^)]*)\)\s*;", re.I)


def current_signatures() -> dict[str, str]:
    """Each function of sql/src/ by name: its signature as its COMMENT ON
    FUNCTION gives it (name(types))."""
    signatures = {}
    for path in manifest.functions():
        for m in re.finditer(r"^COMMENT ON FUNCTION @extschema@\.(\w+)\(([^)]*)\)", path.read_text(), re.M):
            signatures[m.group(1)] = f"{m.group(1)}({m.group(2)})"
    return signatures


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def upgrade_path(extension: str, frm: str, to: str) -> list[pathlib.Path]:
    """The committed upgrade scripts from version frm to version to (the
    shortest path, as ALTER EXTENSION finds it)."""
    steps: dict[str, list[tuple[str, pathlib.Path]]] = {}
    for path in SQL.glob(f"{extension}--*--*.sql"):
        m = re.fullmatch(re.escape(extension) + r"--(.+)--(.+)\.sql", path.name)
        steps.setdefault(m.group(1), []).append((m.group(2), path))
    paths = {frm: []}
    frontier = [frm]
    while frontier and to not in paths:
        nxt = []
        for v in frontier:
            for w, path in steps.get(v, []):
                if w not in paths:
                    paths[w] = paths[v] + [path]
                    nxt.append(w)
        frontier = nxt
    if to not in paths:
        raise SystemExit(f"error: no upgrade path from {frm} to {to} in sql/")
    return paths[to]


def replay_to(extension: str, version: str) -> sqlscript.CatalogState:
    """The functions that version installs: the base install script and the
    upgrade scripts to it, replayed."""
    state = sqlscript.CatalogState()
    for path in [SQL / f"{extension}--{BASE_VERSION}.sql", *upgrade_path(extension, BASE_VERSION, version)]:
        state.replay(sqlscript.split(path.read_text()))
    return state


def minimal(script: str, state: sqlscript.CatalogState, header: str) -> str:
    """script without the statements that would leave things as they are
    (state: before it runs), and without comments outside statements."""
    kept = []
    for statement in sqlscript.split(script):
        if not state.is_noop(statement):
            kept.append(statement.text)
        state.apply(statement)
    return header + kept[0] + "\n\n" + "\n\n".join(kept[1:]) + "\n"


def main(head_path: str, out_path: str, extension: str) -> int:
    head = ROOT / head_path
    m = re.fullmatch(r"(.+)--(.+)\.sql", head.name)
    if not m:
        print(f"error: {head_path}: expected A--B.sql", file=sys.stderr)
        return 1
    old, new = m.groups()
    parts = [f"\\echo Use \"ALTER EXTENSION {extension} UPDATE TO '{new}'\" to load this file. \\quit\n"]
    after_functions: list[str] = []
    target = parts
    # Functions the head drops that the sources define again: a new signature
    # (an internal one carries no grants worth keeping, but carrying is
    # harmless).
    signatures = current_signatures()
    carried = [
        (f"{m.group(1)}({m.group(2).strip()})", signatures[m.group(1)])
        for m in (_DROP_LINE.match(line) for line in head.read_text().splitlines())
        if m and m.group(1) in signatures
    ]
    captured = False
    for line in head.read_text().splitlines(keepends=True):
        # Before the head's first drop of such a function.
        if carried and not captured and _DROP_LINE.match(line):
            captured = True
            pairs = ",\n                ".join(f"({_sql_literal(o)}, {_sql_literal(n)})" for o, n in carried)
            parts.append(GRANT_CARRY_CAPTURE.format(pairs=pairs).lstrip("\n"))
        if re.fullmatch(r"--\s*@after functions\s*\n?", line):
            target = after_functions
            continue
        inc = re.fullmatch(r"--\s*@include\s+(\S+)\s*\n?", line)
        if inc:
            path = ROOT / inc.group(1)
            if not path.is_file():
                print(f"error: {head_path}: @include {inc.group(1)}: no such file", file=sys.stderr)
                return 1
            text = path.read_text()
            # A view is replaced in place, keeping its grants (a DROP would lose
            # the admin set's SELECT, and re-granting needs the catalog update
            # that only a superuser may make); a new one is created by it too.
            text = re.sub(r"^CREATE VIEW ", "CREATE OR REPLACE VIEW ", text, flags=re.M)
            target.append(text.rstrip("\n") + "\n")
        else:
            target.append(line)
    functions = manifest.functions()
    for path in functions:
        text = path.read_text()
        replaced, count = re.subn(r"^CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION ", text, flags=re.M)
        if count == 0:
            print(f"error: {path}: no CREATE FUNCTION", file=sys.stderr)
            return 1
        parts.append(replaced.rstrip("\n") + "\n")
    if carried:
        parts.append(GRANT_CARRY_APPLY.lstrip("\n"))
    parts.extend(after_functions)
    # The comments on the data model, so that an edited comment reaches
    # upgraded installs (those that A already has are left out below).
    for path in (p for p in manifest.sources() if p.parent.name == "schema"):
        for statement in sqlscript.split(path.read_text()):
            if statement.head.upper().startswith("COMMENT ON "):
                parts.append(statement.text + "\n")
    # CREATE OR REPLACE FUNCTION clears the settings set apart from the
    # headers: set them again, as a fresh install does.  (Comments between
    # statements are dropped by minimal(): the sources hold them.)
    settings = manifest.SRC / "access" / "entry_point_settings.sql"
    parts.append(settings.read_text().rstrip("\n") + "\n")
    state = replay_to(extension, old)
    # The grants recorded by grant_access, applied to new signatures and sets:
    # only when a set changed (_access_functions names every function of every
    # set with its signature) or the head drops a function (that a set may hold).
    # Else the script grants nothing, and so needs no catalog update, which only
    # a superuser may make: the owner of a database can run ALTER EXTENSION
    # UPDATE itself (issue 39).
    access_functions = manifest.SRC / "access" / "_access_functions.sql"
    sets_changed = any(
        not state.is_noop(statement)
        for statement in sqlscript.split(access_functions.read_text())
        if statement.head.upper().startswith("CREATE FUNCTION")
    )
    # (An internal function, which no set names, is granted to nobody: its
    # drop needs nothing re-applied.)
    access_text = access_functions.read_text()
    drops = any(
        re.search(rf"\b{re.escape(name)}\(", access_text)
        for name in re.findall(r"^\s*DROP\s+FUNCTION\s+(?:IF\s+EXISTS\s+)?(?:@extschema@\.)?(\w+)",
                               head.read_text(), re.I | re.M)
    )
    if sets_changed or drops:
        parts.append("SELECT @extschema@._access_apply();\n")
        parts.append(INIT_PRIVS_FIX.format(extension=extension))
    content = minimal(
        "".join(parts), state,
        f"-- Generated by make from {head_path} and sql/src/ ({extension} {old} -> {new}): the\n"
        "-- statements that change something. Do not edit: edit those and run make.\n",
    )
    out = ROOT / out_path
    if out.exists() and out.read_text() == content:
        return 0
    out.write_text(content)
    print(f"built {out_path} from {head_path} and {len(functions)} function file(s)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print("usage: build_upgrade.py sql/upgrade/A--B.sql sql/EXT--A--B.sql EXT", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
