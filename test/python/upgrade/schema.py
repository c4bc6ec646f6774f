"""Compare the lonnymq schema of two databases: an upgraded one and a fresh install.

pg_dump does not dump extension member objects, so dump_schema() works on a
throwaway clone of the database in which the members are detached from the
extension (their pg_depend 'e' rows deleted), then runs
`pg_dump --schema-only --schema=lonnymq`: every object of the schema with its
definition, comment, owner and privileges (pg_dump writes privileges relative
to pg_init_privs, which it reads whatever the membership, so the initial
privileges an extension script recorded count too).

normalise() removes only what legitimately differs between two dumps (the
header, SET lines, the random \\restrict key) and sorts the lines inside each
CREATE TABLE, so that columns (and inline constraints) are compared by name:
an upgrade adds columns at the end of a table.  Nothing else is touched.

extension_facts() reads what pg_dump does not show once the members are
detached: the extension's properties, its config-dump registrations
(extconfig / extcondition, by table name), its member objects, and the
initial privileges recorded for them.

fingerprint() digests both, columns in their order: what a version installs,
exactly.  released_schemas.txt holds the fingerprint of every released
version as its own install script installed it (test_upgrade_released.py).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import subprocess
import uuid

import psycopg

_DROP = (
    re.compile(r"^\\(un)?restrict "),          # pg_dump 15.14+: a random key per dump
    re.compile(r"^-- Dumped (from database|by pg_dump) version "),
    re.compile(r"^-- (Started|Completed) on "),
    re.compile(r"^-- TOC entry "),
    re.compile(r"^SET [a-z_]+ = "),
    re.compile(r"^SELECT pg_catalog\.set_config\('search_path', '', false\);$"),
)
_CREATE_TABLE = re.compile(r"^CREATE (UNLOGGED )?TABLE \S+ \($")


def dump_schema(cluster, dbname: str) -> str:
    """pg_dump --schema-only --schema=lonnymq of a clone of dbname whose lonnymq
    members are detached from the extension.  The clone is dropped afterwards."""
    tmp = f"detached_{uuid.uuid4().hex[:12]}"
    cluster.psql(f'CREATE DATABASE "{tmp}" TEMPLATE "{dbname}"')
    try:
        cluster.psql(
            "DELETE FROM pg_catalog.pg_depend WHERE deptype = 'e' AND refclassid = "
            "'pg_catalog.pg_extension'::regclass AND refobjid = "
            "(SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'lonnymq')",
            dbname=tmp,
        )
        proc = subprocess.run(
            [str(cluster.bindir / "pg_dump"), "--schema-only", "--schema=lonnymq",
             "--no-tablespaces", *cluster.client_args(tmp)],
            env=cluster.client_env(), capture_output=True, text=True, timeout=120,
        )
        if proc.returncode != 0:
            raise AssertionError(f"pg_dump of {dbname} (as {tmp}) failed:\n{proc.stderr}")
        return proc.stdout
    finally:
        cluster.drop_database(tmp)


def _kept_lines(dump: str) -> list[str]:
    """The dump's lines but those that differ between dumps of one schema."""
    return [line for line in dump.splitlines() if not any(p.search(line) for p in _DROP)]


def normalise(dump: str) -> list[str]:
    out: list[str] = []
    table: list[str] | None = None
    for line in _kept_lines(dump):
        if table is not None:
            if line.startswith(")"):
                out += sorted(table)
                out.append(line)
                table = None
            else:
                table.append(line.rstrip(","))
            continue
        out.append(line)
        if _CREATE_TABLE.match(line):
            table = []
    assert table is None, "unterminated CREATE TABLE in the dump"
    # Blank-line runs carry no meaning.
    squeezed: list[str] = []
    for line in out:
        if line.strip() == "" and squeezed and squeezed[-1].strip() == "":
            continue
        squeezed.append(line)
    return squeezed


def ordered(dump: str) -> list[str]:
    """The dump's lines as fingerprint() digests them: normalise() but with
    the columns in their order."""
    return _kept_lines(dump)


def fingerprint(dump: str, facts: dict[str, list[tuple]]) -> str:
    """sha256 of a dump_schema() output (only the lines that differ between
    dumps of the same schema dropped; columns kept in their order) and of
    extension_facts()."""
    body = "\n".join(_kept_lines(dump)) + "\n" + json.dumps({k: [list(map(str, r)) for r in v] for k, v in facts.items()},
                                                sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def unified_diff(a: list[str], b: list[str], a_name: str, b_name: str) -> str:
    return "\n".join(difflib.unified_diff(a, b, a_name, b_name, n=3, lineterm=""))


_FACTS = {
    "extension": """
        SELECT e.extname, e.extversion, e.extrelocatable, n.nspname, pg_get_userbyid(e.extowner)
        FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
        WHERE e.extname = 'lonnymq'
    """,
    # pg_extension_config_dump registrations, by table / sequence name.
    "config dump (extconfig, extcondition)": """
        SELECT u.cfg::regclass::text, u.cond
        FROM pg_extension AS e,
             unnest(e.extconfig, e.extcondition) AS u (cfg, cond)
        WHERE e.extname = 'lonnymq'
        ORDER BY 1, 2
    """,
    "member objects": """
        SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
        FROM pg_depend AS d JOIN pg_extension AS e ON e.oid = d.refobjid
        WHERE d.deptype = 'e' AND d.refclassid = 'pg_extension'::regclass AND e.extname = 'lonnymq'
        ORDER BY 1
    """,
    # Initial privileges: what pg_dump takes as the starting point of an
    # object's privileges (it dumps only the GRANTs and REVOKEs from there).
    # Every GRANT and REVOKE run by an extension script (CREATE or ALTER
    # EXTENSION) is recorded in pg_init_privs.  Compared as pg_dump uses them:
    # the recorded ACL, or the object type's default ACL when none is recorded
    # (an equivalent starting point); aclitems sorted.  The extension's members
    # and its schema.
    "initial privileges (pg_init_privs, else the default ACL)": """
        WITH e AS (SELECT oid, extnamespace FROM pg_extension WHERE extname = 'lonnymq'),
        obj AS (
            SELECT d.classid, d.objid FROM pg_depend AS d, e
            WHERE d.deptype = 'e' AND d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
            UNION
            SELECT 'pg_namespace'::regclass, e.extnamespace FROM e
        )
        SELECT pg_describe_object(o.classid, o.objid, 0), coalesce(i.objsubid, 0),
               ARRAY(SELECT a::text FROM unnest(coalesce(i.initprivs, CASE
                   WHEN o.classid = 'pg_proc'::regclass THEN acldefault('f', p.proowner)
                   WHEN o.classid = 'pg_namespace'::regclass THEN acldefault('n', n.nspowner)
                   WHEN o.classid = 'pg_type'::regclass THEN acldefault('T', t.typowner)
                   WHEN c.relkind = 'S' THEN acldefault('s', c.relowner)
                   WHEN c.relkind IN ('r', 'p', 'v', 'm', 'f') THEN acldefault('r', c.relowner)
               END)) AS a ORDER BY 1)
        FROM obj AS o
        LEFT JOIN pg_init_privs AS i ON i.classoid = o.classid AND i.objoid = o.objid
        LEFT JOIN pg_proc AS p ON o.classid = 'pg_proc'::regclass AND p.oid = o.objid
        LEFT JOIN pg_class AS c ON o.classid = 'pg_class'::regclass AND c.oid = o.objid
        LEFT JOIN pg_type AS t ON o.classid = 'pg_type'::regclass AND t.oid = o.objid
        LEFT JOIN pg_namespace AS n ON o.classid = 'pg_namespace'::regclass AND n.oid = o.objid
        ORDER BY 1, 2
    """,
}


def extension_facts(dsn: str) -> dict[str, list[tuple]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {name: [tuple(r) for r in conn.execute(q)] for name, q in _FACTS.items()}


# Every privilege on lonnymq's objects, by grantee name ('PUBLIC' for 0); owners
# included (a changed owner is a difference too).
PRIVILEGES = """
    WITH acl AS (
        SELECT 'schema' AS kind, n.nspname::text AS obj,
               (aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner)))).*
        FROM pg_namespace AS n WHERE n.nspname = 'lonnymq'
        UNION ALL
        SELECT 'function', p.oid::regprocedure::text,
               (aclexplode(coalesce(p.proacl, acldefault('f', p.proowner)))).*
        FROM pg_proc AS p WHERE p.pronamespace = 'lonnymq'::regnamespace
        UNION ALL
        SELECT 'relation', c.oid::regclass::text,
               (aclexplode(coalesce(c.relacl, acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char",
                                                         c.relowner)))).*
        FROM pg_class AS c WHERE c.relnamespace = 'lonnymq'::regnamespace
          AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
        UNION ALL
        SELECT 'column', a.attrelid::regclass::text || '.' || a.attname,
               (aclexplode(a.attacl)).*
        FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
        WHERE c.relnamespace = 'lonnymq'::regnamespace AND a.attacl IS NOT NULL
        UNION ALL
        SELECT 'type', t.oid::regtype::text,
               (aclexplode(coalesce(t.typacl, acldefault('T', t.typowner)))).*
        FROM pg_type AS t WHERE t.typnamespace = 'lonnymq'::regnamespace
          AND t.typrelid = 0 AND t.typcategory <> 'A'
    )
    SELECT kind, obj,
           CASE WHEN grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(grantee) END,
           pg_get_userbyid(grantor), privilege_type, is_grantable
    FROM acl
    ORDER BY 1, 2, 3, 4, 5
"""


def privileges(dsn: str) -> list[tuple]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(PRIVILEGES)]
