"""Roles and privileges: nothing for PUBLIC, three access sets granted in one
statement each, and a search_path that planted objects cannot hijack."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import errors


@pytest.fixture
def roles(db):
    suffix = uuid.uuid4().hex[:8]
    names = {k: f"lmq_{k}_{suffix}" for k in ("nobody", "producer", "consumer", "admin", "attacker", "victim")}
    with db.connect() as conn:
        for name in names.values():
            conn.execute(f'CREATE ROLE "{name}" LOGIN')
        conn.execute("SELECT lonnymq.grant_access(%s, 'producer')", (names["producer"],))
        conn.execute("SELECT lonnymq.grant_access(%s, 'consumer')", (names["consumer"],))
        conn.execute("SELECT lonnymq.grant_access(%s, 'admin')", (names["admin"],))
        conn.execute("SELECT lonnymq.grant_access(%s, 'producer')", (names["victim"],))
        conn.execute("SELECT lonnymq.grant_access(%s, 'consumer')", (names["victim"],))
    yield names
    db.close()
    with db.connect() as conn:
        for name in names.values():
            conn.execute(f'DROP OWNED BY "{name}" CASCADE')
    db.close()
    for name in names.values():
        db.cluster.psql(f'DROP ROLE IF EXISTS "{name}"')


def as_role(db, role):
    return psycopg.connect(db.cluster.dsn(db.name, user=role), autocommit=True)


def denied(conn, sql, params=()):
    try:
        conn.execute(sql, params)
    except errors.InsufficientPrivilege:
        return True
    return False


def test_a_role_without_a_grant_can_do_nothing(db, roles):
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.message_create('c', 'secret')")
    with as_role(db, roles["nobody"]) as conn:
        for sql in [
            "SELECT lonnymq.message_create('c', 'x')",
            "SELECT * FROM lonnymq.message_dequeue(1000)",
            "SELECT lonnymq.message_complete(1, 1)",
            "SELECT lonnymq.channel_set('c', 1)",
            "SELECT lonnymq.channel_drop('c', true)",
            "SELECT content FROM lonnymq.message",
            "SELECT * FROM lonnymq.channel",
            "SELECT lonnymq.grant_access(current_user, 'admin')",
        ]:
            assert denied(conn, sql), sql


def test_a_producer_can_create_but_not_dequeue_or_read(db, roles):
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.message_create('c', 'someone else''s secret')")
    with as_role(db, roles["producer"]) as conn:
        assert conn.execute("SELECT lonnymq.message_create('c', 'mine')").fetchone()[0] is not None
        assert conn.execute("SELECT lonnymq.to_epoch(now())").fetchone()[0] > 0
        for sql in [
            "SELECT * FROM lonnymq.message_dequeue(1000)",
            "SELECT lonnymq.message_complete(1, 1)",
            "SELECT lonnymq.message_defer(1, 1)",
            "SELECT lonnymq.message_heartbeat(1, 1, 1000)",
            "SELECT lonnymq.channel_set('c', 1)",
            "SELECT content FROM lonnymq.message",
            "UPDATE lonnymq.channel SET max_size = 1",
            "SELECT lonnymq.grant_access(current_user, 'admin')",
        ]:
            assert denied(conn, sql), sql


def test_a_consumer_can_work_but_not_change_channels(db, roles):
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.message_create('c', 'job')")
    with as_role(db, roles["consumer"]) as conn:
        row = conn.execute("SELECT id, num_attempts FROM lonnymq.message_dequeue(60000)").fetchone()
        assert row is not None
        assert conn.execute("SELECT lonnymq.message_heartbeat(%s, %s, 60000)", row).fetchone()[0] is True
        assert conn.execute("SELECT lonnymq.message_complete(%s, %s)", row).fetchone()[0] is True
        for sql in [
            "SELECT lonnymq.channel_set('c', 1)",
            "SELECT lonnymq.channel_drop('c', true)",
            "SELECT lonnymq.message_create('c', 'x')",
            "SELECT * FROM lonnymq.channel",
            "DELETE FROM lonnymq.message",
        ]:
            assert denied(conn, sql), sql


def test_an_admin_can_set_channels_and_inspect(db, roles):
    with as_role(db, roles["admin"]) as conn:
        conn.execute("SELECT lonnymq.channel_set('c', 2, 10, 0)")
        assert conn.execute("SELECT max_concurrency FROM lonnymq.channel WHERE name = 'c'").fetchone() == (2,)
        conn.execute("SELECT lonnymq.message_create('c', 'x')")
        assert conn.execute("SELECT count(*) FROM lonnymq.message").fetchone() == (1,)
        assert denied(conn, "DELETE FROM lonnymq.message"), "admin reads, it does not write tables directly"


def test_revoke_access_takes_a_set_back_but_keeps_what_another_set_needs(db, roles):
    victim = roles["victim"]
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.revoke_access(%s, 'producer')", (victim,))
        conn.execute("SELECT lonnymq.message_create('c', 'job')")
    with as_role(db, victim) as conn:
        assert denied(conn, "SELECT lonnymq.message_create('c', 'x')")
        assert conn.execute("SELECT count(*) FROM lonnymq.message_dequeue(60000)").fetchone() == (1,)
        assert conn.execute("SELECT lonnymq.to_epoch(now())").fetchone()[0] > 0  # still in 'consumer'
    with db.connect() as conn:
        conn.execute("SELECT lonnymq.revoke_access(%s, 'consumer')", (victim,))
    with as_role(db, victim) as conn:
        assert denied(conn, "SELECT lonnymq.to_epoch(now())")
        assert denied(conn, "SELECT * FROM lonnymq.message_dequeue(60000)")


def test_grant_access_refuses_bad_input(db, roles):
    with db.connect() as conn:
        for sql, state in [
            ("SELECT lonnymq.grant_access(NULL, 'producer')", errors.NullValueNotAllowed),
            ("SELECT lonnymq.grant_access(%s, 'root')", errors.InvalidParameterValue),
            ("SELECT lonnymq.grant_access('no such role', 'producer')", errors.UndefinedObject),
        ]:
            with pytest.raises(state):
                conn.execute(sql, (roles["nobody"],) if "%s" in sql else ())
    # a role name made of SQL is quoted, not executed
    odd = f'x"; DROP TABLE lonnymq.message; --{uuid.uuid4().hex[:6]}'
    with db.connect() as conn:
        conn.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN").format(psycopg.sql.Identifier(odd)))
        try:
            conn.execute("SELECT lonnymq.grant_access(%s, 'producer')", (odd,))
            assert conn.execute("SELECT to_regclass('lonnymq.message') IS NOT NULL").fetchone() == (True,)
            assert conn.execute(
                "SELECT has_function_privilege(%s, 'lonnymq.message_create(text, bytea, bigint, text, jsonb, bigint[], text)', 'EXECUTE')",
                (odd,)).fetchone() == (True,)
        finally:
            conn.execute(psycopg.sql.SQL("DROP OWNED BY {}").format(psycopg.sql.Identifier(odd)))
            conn.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(odd)))


PLANTED = """
CREATE TABLE public.hijacked (what text);
GRANT INSERT, SELECT ON public.hijacked TO PUBLIC;
CREATE TABLE public.message (id bigint, channel_id bigint, dequeue_at bigint, is_locked boolean,
                             num_attempts integer, created_at bigint, content bytea, state bytea);
GRANT SELECT, INSERT ON public.message TO PUBLIC;
CREATE TABLE public.channel (id bigint, name text);
CREATE SEQUENCE public.position_mark_seq START 4611686018427387904;
CREATE SEQUENCE public.position_bound_seq START 4611686018427387904;
CREATE FUNCTION public.pg_sequence_last_value(regclass) RETURNS bigint LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('pg_sequence_last_value'); SELECT 4611686018427387904::bigint $$;
CREATE FUNCTION public.hashtextextended(text, bigint) RETURNS bigint LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('hashtextextended'); SELECT 0::bigint $$;
CREATE FUNCTION public.pg_advisory_xact_lock_shared(integer, integer) RETURNS void LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('pg_advisory_xact_lock_shared') $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('now'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('clock_timestamp'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION public.floor(numeric) RETURNS numeric LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('floor'); SELECT 0::numeric $$;
CREATE FUNCTION public.nextval(regclass) RETURNS bigint LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('nextval'); SELECT 1::bigint $$;
CREATE FUNCTION public.coalesce_trap(bigint, bigint) RETURNS boolean LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('bigint <='); SELECT true $$;
CREATE OPERATOR public.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.coalesce_trap);
CREATE FUNCTION public.num_mul(numeric, integer) RETURNS numeric LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('numeric *'); SELECT 0::numeric $$;
CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.num_mul);
CREATE FUNCTION public.length(text) RETURNS integer LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('length'); SELECT 1 $$;
CREATE FUNCTION public.octet_length(bytea) RETURNS integer LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('octet_length'); SELECT 1 $$;
CREATE FUNCTION public.timestamptz_check(pg_catalog.timestamptz) RETURNS boolean LANGUAGE sql
    AS $$ INSERT INTO public.hijacked VALUES ('domain timestamptz'); SELECT true $$;
CREATE DOMAIN public.timestamptz AS pg_catalog.timestamptz CHECK (public.timestamptz_check(VALUE));
"""


def test_objects_planted_in_public_change_nothing(db, roles):
    attacker, victim = roles["attacker"], roles["victim"]
    with db.connect() as conn:
        conn.execute(f'GRANT CREATE ON SCHEMA public TO "{attacker}"')
    with as_role(db, attacker) as conn:
        conn.execute(PLANTED)
    with as_role(db, victim) as conn:
        # The victim puts public before pg_catalog in its search_path.
        conn.execute("SET search_path = public, pg_catalog")
        before = conn.execute("SELECT lonnymq.to_epoch(pg_catalog.clock_timestamp())").fetchone()[0]
        assert before > 1_700_000_000_000, "to_epoch used a planted function or operator"
        ids = [conn.execute("SELECT lonnymq.message_create('c', %s)", (f"m{i}".encode(),)).fetchone()[0]
               for i in range(3)]
        conn.execute("SELECT lonnymq.message_create('c', 'later', lonnymq.to_epoch(pg_catalog.now()) + 3600000)")
        got = conn.execute("SELECT id, num_attempts, dequeue_at FROM lonnymq.message_dequeue(60000, 10)").fetchall()
        assert [r[0] for r in got] == ids, "the future message must wait; the others come in order"
        for row in got:
            assert conn.execute("SELECT lonnymq.message_complete(%s, %s)", row[:2]).fetchone()[0] is True
        assert conn.execute("SELECT count(*) FROM public.message").fetchone() == (0,)
        hijacked = conn.execute("SELECT string_agg(what, ', ') FROM public.hijacked").fetchone()[0]
    assert hijacked is None, f"planted objects were called: {hijacked}"


def _documented_sets() -> dict[str, set[str]]:
    """doc/README.md's Privileges table: the functions each set may call
    (the backticked names of its "may call" column that name functions;
    admin's "everything above" is the union of the sets above it)."""
    text = (Path(__file__).resolve().parents[2] / "doc" / "README.md").read_text()
    section = text.split("## Privileges", 1)[1].split("\n## ", 1)[0]
    sets: dict[str, set[str]] = {}
    for line in section.splitlines():
        m = re.match(r"\| `(producer|consumer|monitor|admin)` \| (.*?) \|", line)
        if m:
            names = set(re.findall(r"`([a-z_][a-z0-9_]*)`", m.group(2)))
            if m.group(1) == "admin":
                assert "everything above" in m.group(2)
                names |= set().union(*sets.values())
            sets[m.group(1)] = names
    assert set(sets) == {"producer", "consumer", "monitor", "admin"}, sets
    return sets


def assert_privilege_matrix(conn, holders: dict[str, str], nobodies: list[str]) -> None:
    """holders: access set -> a role given only that set; each may execute
    exactly the functions doc/README.md lists for its set, and each of
    nobodies (roles without a set, "public") none at all."""
    documented = _documented_sets()
    functions = {name for (name,) in conn.execute(
        "SELECT DISTINCT p.proname FROM pg_proc AS p WHERE p.pronamespace = 'lonnymq'::regnamespace")}
    for access, role in holders.items():
        may = {name for (name,) in conn.execute(
            "SELECT DISTINCT p.proname FROM pg_proc AS p"
            " WHERE p.pronamespace = 'lonnymq'::regnamespace AND has_function_privilege(%s, p.oid, 'EXECUTE')",
            (role,))}
        assert may == documented[access] & functions, (
            f"{access}: may execute but undocumented {sorted(may - documented[access])}, "
            f"documented but not executable {sorted((documented[access] & functions) - may)}")
    for role in nobodies:
        none = conn.execute(
            "SELECT array_agg(p.proname) FROM pg_proc AS p WHERE p.pronamespace = 'lonnymq'::regnamespace"
            " AND has_function_privilege(%s, p.oid, 'EXECUTE')", (role,)).fetchone()[0]
        assert none is None, f"{role} may execute {none}"


def test_each_set_may_execute_exactly_what_the_privileges_page_says(db, roles):
    """The privilege matrix, from the catalog: a role given one set may
    execute exactly the functions doc/README.md lists for it (internal ones
    included: the monitor set's _metrics is there because the view reads
    it), and a role with no set, like PUBLIC, none at all."""
    suffix = uuid.uuid4().hex[:8]
    monitor = f"lmq_monitor_{suffix}"
    with db.connect() as conn:
        conn.execute(f'CREATE ROLE "{monitor}" LOGIN')
        conn.execute("SELECT lonnymq.grant_access(%s, 'monitor')", (monitor,))
        holders = {"producer": roles["producer"], "consumer": roles["consumer"], "admin": roles["admin"],
                   "monitor": monitor}
        try:
            assert_privilege_matrix(conn, holders, [roles["nobody"], "public"])
        finally:
            conn.execute("SELECT lonnymq.revoke_access(%s, 'monitor')", (monitor,))
            conn.execute(f'DROP OWNED BY "{monitor}" CASCADE')
    db.close()
    db.cluster.psql(f'DROP ROLE IF EXISTS "{monitor}"')
    with as_role(db, roles["nobody"]) as conn:
        assert denied(conn, "SELECT lonnymq.to_epoch(now())")
