"""Every table, view, sequence and composite type of the schema lonnymq, and
every column of its tables and views, carries a COMMENT (pg_description).

Admin roles can SELECT every table (doc/README.md, "Privileges"), so the
columns are public surface: \\d+ and catalog-reading tools should explain
them. Checked on a fresh install (the template database's CREATE EXTENSION).
"""

from __future__ import annotations

# relkind -> what COMMENT ON calls it.
KINDS = {"r": "table", "v": "view", "S": "sequence", "c": "type"}


def test_every_relation_and_column_has_a_comment(db):
    with db.connect() as conn:
        relations = conn.execute(
            """
            SELECT c.relkind::text, c.relname,
                   CASE WHEN c.relkind = 'c'
                        THEN pg_catalog.obj_description(c.reltype, 'pg_type')
                        ELSE pg_catalog.obj_description(c.oid, 'pg_class')
                   END
            FROM pg_catalog.pg_class AS c
            JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
            WHERE n.nspname = 'lonnymq' AND c.relkind IN ('r', 'v', 'S', 'c')
            ORDER BY c.relname
            """
        ).fetchall()
        columns = conn.execute(
            """
            SELECT c.relkind::text, c.relname, a.attname,
                   pg_catalog.col_description(c.oid, a.attnum)
            FROM pg_catalog.pg_class AS c
            JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
            JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid
            WHERE n.nspname = 'lonnymq' AND c.relkind IN ('r', 'v')
              AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY c.relname, a.attnum
            """
        ).fetchall()

    # Guard against a query that finds nothing (and so passes vacuously).
    kinds_found = {kind for kind, _, _ in relations}
    assert kinds_found == set(KINDS), f"expected tables, views, sequences and types, found {kinds_found}"
    assert columns

    missing = [
        f"{KINDS[kind]} lonnymq.{name}"
        for kind, name, comment in relations
        if not (comment or "").strip()
    ] + [
        f"column lonnymq.{rel}.{col} ({KINDS[kind]})"
        for kind, rel, col, comment in columns
        if not (comment or "").strip()
    ]
    assert not missing, f"{len(missing)} objects without a COMMENT:\n  " + "\n  ".join(missing)
