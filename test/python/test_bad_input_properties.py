"""Property-based bad input for every public function (issue "Hardening…",
part 5): test_extremes.py tries fixed boundary values; this file lets
Hypothesis generate the arguments.

Which functions and parameters: every public function has a file
sql/src/<group>/<name>.sql (one test per name, so a new function
is tested without an edit here), and its parameters' names, types and
defaults come from pg_proc. Each type has a strategy (a type without one
fails the test: give it one); a few parameter names add the values that
reach deeper code (existing and unknown channels, schedules, keys and
roles, real message ids with their current and stale tokens):

    text, name   Unicode (no surrogates), edge lengths (255/256, 1024/1025
                 characters), quoting, and rarely a NUL character, 300 or
                 5000 repeats of a text, 1 MiB + 1 bytes, 10 MB;
    bytea        binary with NULs, and rarely 10 MiB, 16 MiB, 16 MiB + 1;
    integer, bigint   random values, the type's extremes and the limits of
                 the doc pages (0, 1, 1000/1001, 10000/10001, 365 days,
                 years 1 and 9999 in epoch ms), ids and tokens;
    double precision  random values, NaN, +-Infinity, the limits;
    boolean, timestamptz (infinity, 4713 BC, 294276 AD);
    arrays       empty, NULL elements, 2 and 3 dimensions, rarely 10000,
                 10001 or 100000 elements;
    and NULL for every parameter; a parameter with a default is sometimes
    left out (named notation).

A call's arguments are all generated so; or all plausible (existing names,
real ids and tokens, small durations: such calls mostly succeed, and then
the queue is checked); or all plausible but one generated, which reaches
the checks that come after the other arguments'. Run with -s, each test
prints what its calls did (how many succeeded, were refused with which
SQLSTATE, carried a NUL, a 1 MiB value, a long or multidimensional array).

The property, for each generated call: on a connection that is alone on
its database (lock_timeout 60 s: a lock wait is not bad input), a
fingerprint of everything lonnymq keeps (each table's rows, each sequence's
last_value, the privileges on lonnymq's objects) and the advisory locks
the session holds is taken; then the call runs as the first
statement of its own transaction, and

- either it raises an SQLSTATE that the function's doc page lists
  (conftest.documented_sqlstates), and after the ROLLBACK the fingerprint
  is unchanged: a refused call leaves nothing behind, not even in what a
  rollback does not undo (sequences, session-level advisory locks);
- or it succeeds, and in the same transaction the queue still works (a
  message_create, a message_dequeue, tick() and the channel_stats view
  raise nothing), then the transaction is rolled back, so every example
  starts from the same state (the module's setup, committed once).

A text containing NUL never reaches the server: PostgreSQL text cannot
hold it, and psycopg refuses to send it (DataError, no SQLSTATE). That
counts as a refusal that changes nothing; the test checks that it was the
client (no SQLSTATE, a NUL in a text argument, a transaction not in error)
and compares the fingerprint as for any refusal. NULs in bytea do reach
the server.

Seed and length: by default every run tries the same examples
(derandomize), LONNYMQ_HYPOTHESIS_EXAMPLES per function (default 150:
about 45 s on 2 cores), and no example database is written. To run longer
or differently:

    LONNYMQ_HYPOTHESIS_EXAMPLES=2000 .venv/bin/python -m pytest -q test/python/test_bad_input_properties.py
    LONNYMQ_HYPOTHESIS_SEED=random ...   # new examples on each run (or an integer: that seed)

(`make test` passes the environment on: LONNYMQ_HYPOTHESIS_EXAMPLES=2000
make test PYTEST_ARGS='-k bad_input'.) A failure prints Hypothesis'
minimal example and the SQL call.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from datetime import timezone

import psycopg
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from psycopg import sql
from psycopg.pq import TransactionStatus

from conftest import REPO_ROOT, documented_sqlstates
from lonnymq_dev.limits import (BIGINT_MAX, BIGINT_MIN, DAY_MS, HOUR_MS, INTEGER_MAX, INTEGER_MIN,
                                MAX_BATCH, MAX_CHANNEL_CHARS, MAX_CONTENT_BYTES, MAX_KEY_CHARS)

EXAMPLES = int(os.environ.get("LONNYMQ_HYPOTHESIS_EXAMPLES", "150"))
SEED = os.environ.get("LONNYMQ_HYPOTHESIS_SEED", "").strip()

MIB = 1024 * 1024
MAX_DURATION_MS = 365 * DAY_MS                       # p_lock_ms, *_interval_ms, *_ms limits
MIN_EPOCH_MS, MAX_EPOCH_MS = -62135596800000, 253402300799999  # years 1 to 9999
MAX_ERROR_BYTES = MIB                                # p_error

# Every public function: one file sql/src/<group>/<name>.sql each, which
# creates it (a name without a leading underscore).
FUNCTIONS = sorted(
    f.stem
    for f in (REPO_ROOT / "sql" / "src").glob("*/*.sql")
    if not f.stem.startswith("_")
    and re.search(rf"^CREATE FUNCTION @extschema@\.{f.stem}\(", f.read_text(), re.M)
)

SETUP = """
SELECT lonnymq.channel_set('c', p_max_attempts => 3, p_retain_history => true, p_dedup_window_ms => 3600000);
SELECT lonnymq.message_create('c', convert_to('m' || g, 'UTF8'), NULL, 'k' || g) FROM generate_series(1, 6) AS g;
SELECT lonnymq.message_complete(d.id, d.num_attempts) FROM lonnymq.message_dequeue(60000, 1, 'c') AS d;
SELECT lonnymq.message_create('c', 'later', lonnymq.to_epoch(now()) + 3600000);
SELECT lonnymq.channel_set('d', p_max_attempts => 1);
SELECT lonnymq.message_create('d', 'x', NULL, 'dk');
SELECT lonnymq.message_fail(d.id, d.num_attempts, 'boom') FROM lonnymq.message_dequeue(60000, 1, 'd') AS d;
SELECT lonnymq.channel_set('lim', p_max_concurrency => 1, p_max_size => 5, p_release_interval_ms => 10);
SELECT lonnymq.message_create('lim', convert_to('l' || g, 'UTF8')) FROM generate_series(1, 3) AS g;
SELECT lonnymq.channel_pause('p');
SELECT lonnymq.message_create('p', 'paused');
SELECT lonnymq.message_create('plain', 'no configuration');
SELECT lonnymq.schedule_set('every', 'c', 'tick', 60000);
SELECT lonnymq.channel_set('t-*', p_max_concurrency => 1, p_retain_history => true);
SELECT lonnymq.message_create('t-1', convert_to('t' || g, 'UTF8')) FROM generate_series(1, 2) AS g;
SELECT lonnymq.topic_bind('ev.*', 'c'), lonnymq.topic_bind('ev.#', 'plain'), lonnymq.topic_bind('ev.x', 't-2');
DO $$ BEGIN CREATE ROLE lonnymq_bad_input_probe; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
SELECT lonnymq.grant_access('lonnymq_bad_input_probe', 'producer');
SELECT count(*) FROM lonnymq.message_dequeue(3600000, 2, 'c');
SELECT count(*) FROM lonnymq.message_dequeue(3600000, 1, 'lim');
SELECT count(*) FROM lonnymq.message_dequeue(3600000, 1, 'plain');
"""

# After a call that succeeded, in its transaction: the queue must still work.
QUEUE_WORKS = (
    "SELECT lonnymq.message_create('c', 'after')",
    "SELECT count(*) FROM lonnymq.message_dequeue(60000, 100)",
    "SELECT lonnymq.tick()",
    "SELECT count(*) FROM lonnymq.channel_stats",
)

SIGNATURES = """
SELECT p.proname, p.oid::regprocedure::text, p.pronargdefaults,
       COALESCE(p.proargnames[1:p.pronargs], '{}'),
       ARRAY(SELECT pg_catalog.format_type(u.t, NULL)
             FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS u (t, i) ORDER BY u.i)
FROM pg_proc AS p
WHERE p.pronamespace = 'lonnymq'::regnamespace AND p.proname !~ '^_' AND p.prokind = 'f'
ORDER BY 2
"""


# ---------------------------------------------------------------- values

class _Omit:
    def __repr__(self) -> str:
        return "<left out>"


OMIT = _Omit()


@dataclass(frozen=True)
class Repeat:
    """unit * times (a str, bytes or one-element list), built only when the
    call is made, so that Hypothesis prints it short."""
    unit: object
    times: int

    def build(self):
        return self.unit * self.times

    def __repr__(self) -> str:
        return f"{self.unit!r} * {self.times}"


def materialize(value):
    if isinstance(value, Repeat):
        return [materialize(v) for v in value.build()] if isinstance(value.unit, list) else value.build()
    if isinstance(value, list):
        return [materialize(v) for v in value]
    return value


def has_nul_text(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(has_nul_text(v) for v in value)
    return False


def rare_kinds(value) -> set[str]:
    """For the summary: which rare kinds of value an argument holds."""
    if isinstance(value, Repeat):
        if isinstance(value.unit, list):
            return {f"with an array of {value.times} elements"} | rare_kinds(value.unit[0])
        return {"with a value of 1 MiB or more"} if len(value.unit) * value.times >= MIB else set()
    if isinstance(value, list):
        nested = {"with a multidimensional array"} if any(isinstance(v, list) for v in value) else set()
        return nested.union(*(rare_kinds(v) for v in value))
    return {"with a NUL in a text"} if isinstance(value, str) and "\x00" in value else set()


@dataclass
class World:
    """The module's committed state, and what the strategies draw from it."""
    conn: psycopg.Connection
    fingerprint_sql: sql.Composable
    fingerprint_labels: list[str]
    channels: list[str]
    schedules: list[str]
    keys: list[str]
    roles: list[str]
    ids: list[int]
    deliveries: list[tuple[int, int]]  # (id, current token) of the locked messages
    tokens: list[int]
    times: list[int]


# ---------------------------------------------------------------- strategies

PLAIN_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=24)
TEXT_EDGES = [
    "", " ", "c ", "C", "c\n", "%s", "'", '"', "\\", "x'); DROP TABLE lonnymq.message; --",
    "\u202ec", "e\u0301", "\ufeff", "😀",
    "x" * MAX_CHANNEL_CHARS, "x" * (MAX_CHANNEL_CHARS + 1), "é" * MAX_CHANNEL_CHARS,
    "😀" * (MAX_CHANNEL_CHARS + 1), "k" * MAX_KEY_CHARS, "k" * (MAX_KEY_CHARS + 1),
]
BIG_TEXT = [Repeat("x", MAX_ERROR_BYTES + 1), Repeat("é", 5 * MIB), Repeat("x", 10 * 1000 * 1000)]
BIG_BYTES = [Repeat(b"x", 10 * MIB), Repeat(b"\x00", MAX_CONTENT_BYTES), Repeat(b"y", MAX_CONTENT_BYTES + 1)]
INTEGER_EDGES = [INTEGER_MIN, INTEGER_MIN + 1, -1, 0, 1, 2, 3, 1000, 1001, MAX_BATCH, MAX_BATCH + 1,
                 INTEGER_MAX - 1, INTEGER_MAX]
BIGINT_EDGES = INTEGER_EDGES + [
    BIGINT_MIN, BIGINT_MIN + 1, MIN_EPOCH_MS - 1, MIN_EPOCH_MS, MAX_DURATION_MS, MAX_DURATION_MS + 1,
    MAX_EPOCH_MS, MAX_EPOCH_MS + 1, INTEGER_MAX + 1, BIGINT_MAX - 1, BIGINT_MAX]
FLOAT_EDGES = [0.0, -0.0, 0.1, 0.999999, 1.0, 1.0000001, 2.0, 999.9, 1000.0, 1000.0001, -1.0,
               math.nan, math.inf, -math.inf, 5e-324, -5e-324, 1.7976931348623157e308, -1.7976931348623157e308]
TIMESTAMP_EDGES = ["infinity", "-infinity", "epoch", "4713-01-01 00:00:00+00 BC", "294276-12-31 23:59:59+00",
                   "0001-01-01 00:00:00+00", "9999-12-31 23:59:59.999999+00", "1970-01-01 00:00:00.0005+00"]
LONG_ARRAYS = [MAX_BATCH, MAX_BATCH + 1, 100_000]


def text_values(known: list[str], big: bool) -> st.SearchStrategy:
    # A NUL never reaches the server (see above): one rare branch, not to
    # spend the examples on the client's refusal.
    branches = [PLAIN_TEXT, st.sampled_from(TEXT_EDGES)]
    if big:
        branches.append(st.one_of(
            st.builds(lambda a, b: a + "\x00" + b, PLAIN_TEXT, PLAIN_TEXT),
            st.builds(Repeat, PLAIN_TEXT.filter(bool), st.sampled_from([300, 5000])),
            st.sampled_from(BIG_TEXT)))
    if known:
        branches.insert(0, st.sampled_from(known))
    return st.one_of(*branches)


def bytea_values(big: bool) -> st.SearchStrategy:
    branches = [st.binary(max_size=48), st.sampled_from([b"", b"\x00", b"\x00" * 9, b"\xff\xfe", "é".encode()])]
    if big:
        branches.append(st.sampled_from(BIG_BYTES))
    return st.one_of(*branches)


def jsonb_values(big: bool) -> st.SearchStrategy:
    """JSON texts (the call casts them to jsonb): objects, which headers
    must be, and every other kind of JSON value; big: also objects at and
    past the headers' limit of 64 KiB of JSON text.  No NUL and no lone
    surrogate, which jsonb itself refuses before the call."""
    text = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=12)
    scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), text)
    value = st.recursive(
        scalar, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
        max_leaves=8)
    branches = [value.map(json.dumps),
                st.dictionaries(st.sampled_from(["traceparent", "tracestate", "k"]), scalar, max_size=3).map(json.dumps)]
    if big:
        # {"a": "x...x"} is 9 bytes of JSON around the string: at the limit, one past it, far past it.
        branches.append(st.sampled_from([65536 - 9, 65536 - 9 + 1, 1_000_000]).map(
            lambda n: json.dumps({"a": "x" * n})))
    return st.one_of(*branches)


def integer_values(lo: int, hi: int, edges: list[int], known: list[int]) -> st.SearchStrategy:
    branches = [st.sampled_from([e for e in edges if lo <= e <= hi]), st.integers(lo, hi), st.integers(-3, 1001)]
    if known:
        branches.insert(0, st.sampled_from(known))
    return st.one_of(*branches)


def element_values(param: str, typ: str, world: World, big: bool) -> st.SearchStrategy:
    """Non-NULL values of one scalar type for the parameter named param;
    big: also the rare ones (texts with NUL, long and 10 MB values)."""
    if typ in ("text", "name"):
        return text_values(known_names(param, world), big)
    if typ == "bytea":
        return bytea_values(big)
    if typ == "bigint":
        known = world.ids if re.search(r"(^|_)ids?$", param) or param == "p_after" else world.times
        return integer_values(BIGINT_MIN, BIGINT_MAX, BIGINT_EDGES, known)
    if typ == "integer":
        known = world.tokens if "attempt" in param else []
        return integer_values(INTEGER_MIN, INTEGER_MAX, INTEGER_EDGES, known)
    if typ == "double precision":
        return st.one_of(st.sampled_from(FLOAT_EDGES), st.floats())
    if typ == "boolean":
        return st.booleans()
    if typ == "timestamp with time zone":
        return st.one_of(st.sampled_from(TIMESTAMP_EDGES), st.datetimes(timezones=st.just(timezone.utc)))
    if typ == "jsonb":
        return jsonb_values(big)
    raise AssertionError(f"no strategy for {param} {typ}: add one to element_values")


def known_names(param: str, world: World) -> list[str]:
    if param in ("p_key", "p_keys"):
        return world.keys
    if param == "p_name":
        return world.schedules
    if param in ("p_pattern", "p_routing_key"):
        return ["ev.*", "ev.#", "ev.x", "ev", "#", "*.*", "a..b", "nobody"]
    if param == "p_role":
        return world.roles
    if param == "p_access":
        return ["producer", "consumer", "admin", "Producer", "admin ", "nosuch"]
    if param == "p_notify_payload":
        return ["name", "id", "none", "NAME", "payload"]
    if param == "p_after_mode":
        return ["completed", "ended", "Completed", "any", "done"]
    return world.channels


def array_values(param: str, elem_type: str, world: World) -> st.SearchStrategy:
    small = element_values(param, elem_type, world, big=False)
    elem = st.one_of(st.none(), small)
    return st.one_of(
        st.just([]),
        st.lists(elem, min_size=1, max_size=6),
        # one rare element (NUL, long, 10 MB) among small ones
        st.builds(lambda xs, x: xs + [x], st.lists(elem, max_size=2), element_values(param, elem_type, world, True)),
        st.integers(1, 3).flatmap(lambda n: st.lists(st.lists(elem, min_size=n, max_size=n), min_size=1, max_size=3)),
        st.lists(st.lists(st.lists(elem, min_size=2, max_size=2), min_size=2, max_size=2), min_size=1, max_size=2),
        st.builds(lambda x, n: Repeat([x], n), elem, st.sampled_from(LONG_ARRAYS)),
    )


def plausible_values(param: str, typ: str, world: World) -> st.SearchStrategy:
    """Values a caller would pass (existing names, ids, tokens, small
    durations): a call made of them mostly succeeds, and one bad argument
    among them reaches the checks that come after the others'."""
    if typ.endswith("[]"):
        return st.lists(plausible_values(param, typ[:-2], world), min_size=1, max_size=3)
    if typ in ("text", "name"):
        return st.sampled_from(known_names(param, world))
    if typ == "bytea":
        return st.binary(max_size=16)
    if typ == "bigint":
        if re.search(r"(^|_)ids?$", param) or param == "p_after":
            return st.sampled_from(world.ids)
        return st.sampled_from(world.times if param.endswith("_at") else [0, 1000, 60000])
    if typ == "integer":
        return st.sampled_from(world.tokens if "attempt" in param else [1, 2, 10, 100])
    if typ == "double precision":
        return st.just(1.0)
    return element_values(param, typ, world, big=False)


def parameter_values(param: str, typ: str, world: World) -> st.SearchStrategy:
    if typ.endswith("[]"):
        values = array_values(param, typ[:-2], world)
    else:
        values = element_values(param, typ, world, big=True)
    return st.one_of(st.none(), values)


def pairs(world: World, params: list[str]) -> st.SearchStrategy | None:
    """Real (id, token) pairs for functions that take both: the current
    token, or a stale or future one."""
    token = st.sampled_from(world.deliveries).flatmap(
        lambda d: st.sampled_from([d[1], d[1] - 1, d[1] + 1]).map(lambda t: (d[0], t)))
    if "p_num_attempts" not in params:
        return None
    if "p_id" in params:
        return token.map(lambda p: {"p_id": p[0], "p_num_attempts": p[1]})
    if "p_ids" in params:
        return st.lists(token, max_size=4).map(
            lambda ps: {"p_ids": [p[0] for p in ps], "p_num_attempts": [p[1] for p in ps]})
    return None


def arguments(world: World, names: list[str], types: list[str], ndefaults: int) -> st.SearchStrategy:
    """The arguments of one call, by name (OMIT: left out, its default):
    all generated; or all plausible; or all plausible but one generated."""
    bad, good = {}, {}
    for i, (name, typ) in enumerate(zip(names, types)):
        bad[name] = parameter_values(name, typ, world)
        good[name] = plausible_values(name, typ, world)
        if i >= len(names) - ndefaults:
            bad[name] = st.one_of(st.just(OMIT), bad[name])
            good[name] = st.one_of(st.just(OMIT), good[name])
    if not names:
        return st.just({})
    plausible = st.fixed_dictionaries(good)
    paired = pairs(world, names)
    if paired is not None:
        plausible = st.one_of(plausible, st.tuples(plausible, paired).map(lambda t: {**t[0], **t[1]}))
    one_bad = st.tuples(plausible, st.sampled_from(names).flatmap(
        lambda n: bad[n].map(lambda v: (n, v)))).map(lambda t: {**t[0], t[1][0]: t[1][1]})
    return st.one_of(st.fixed_dictionaries(bad), plausible, one_bad)


# ---------------------------------------------------------------- the state

def fingerprint_query(conn) -> tuple[sql.Composable, list[str]]:
    """One SELECT of everything a refused call must leave as it was."""
    parts, labels = [], []
    for rel, kind in conn.execute(
            "SELECT c.oid::regclass::text, c.relkind FROM pg_class AS c "
            "WHERE c.relnamespace = 'lonnymq'::regnamespace AND c.relkind IN ('r', 'p', 'S') ORDER BY 1"):
        if kind == "S":
            parts.append(sql.SQL("pg_sequence_last_value({}::regclass)::text").format(sql.Literal(rel)))
        else:
            parts.append(sql.SQL(
                "(SELECT count(*) || ' ' || md5(COALESCE(string_agg(md5(r::text), ',' ORDER BY md5(r::text)), '')) "
                "FROM {} AS r)").format(sql.SQL(rel)))
        labels.append(rel)
    parts.append(sql.SQL(
        "(SELECT md5(string_agg(p.oid::regprocedure::text || COALESCE(p.proacl::text, '-'), ',' ORDER BY 1)) "
        "FROM pg_proc AS p WHERE p.pronamespace = 'lonnymq'::regnamespace)"))
    labels.append("privileges on lonnymq's functions")
    parts.append(sql.SQL(
        "(SELECT md5(string_agg(c.relname || COALESCE(c.relacl::text, '-'), ',' ORDER BY 1)) "
        "FROM pg_class AS c WHERE c.relnamespace = 'lonnymq'::regnamespace)"
        " || (SELECT COALESCE(n.nspacl::text, '-') FROM pg_namespace AS n WHERE n.nspname = 'lonnymq')"))
    labels.append("privileges on lonnymq's schema, tables and views")
    parts.append(sql.SQL("(SELECT string_agg(l.objid::text || '/' || l.mode, ',' ORDER BY 1) "
                         "FROM pg_locks AS l WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid())"))
    labels.append("advisory locks this session holds")
    return sql.SQL("SELECT ") + sql.SQL(", ").join(parts), labels


def fingerprint(world: World) -> dict[str, str]:
    row = world.conn.execute(world.fingerprint_sql).fetchone()
    world.conn.rollback()
    return dict(zip(world.fingerprint_labels, row))


@pytest.fixture(scope="module")
def world(module_db) -> World:
    with module_db.connect() as setup:
        setup.execute(SETUP)
    conn = module_db.connect(autocommit=False)
    conn.execute("SET lock_timeout = '60s'")
    conn.execute("SET statement_timeout = '300s'")
    conn.commit()
    fp_sql, fp_labels = fingerprint_query(conn)
    deliveries = conn.execute("SELECT id, num_attempts FROM lonnymq.message WHERE is_locked ORDER BY id").fetchall()
    assert len(deliveries) == 4, deliveries
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM lonnymq.message UNION SELECT id FROM lonnymq.dead_letter "
        "UNION SELECT id FROM lonnymq.message_history ORDER BY 1")]
    keys = [r[0] for r in conn.execute("SELECT key FROM lonnymq.message_key ORDER BY 1")]
    now = conn.execute("SELECT lonnymq.to_epoch(now())").fetchone()[0]
    conn.rollback()
    tokens = sorted({t for _, t in deliveries} | {t - 1 for _, t in deliveries} | {t + 1 for _, t in deliveries})
    return World(
        conn=conn, fingerprint_sql=fp_sql, fingerprint_labels=fp_labels,
        channels=["c", "d", "lim", "p", "plain", "t-*", "t-1", "*", "unknown-channel"],
        schedules=["every", "unknown-schedule"],
        keys=keys + ["unknown-key"],
        roles=["lonnymq_bad_input_probe", "postgres", "pg_monitor", "public", "PUBLIC", "unknown_role"],
        ids=ids + [max(ids) + 1000],
        deliveries=deliveries,
        tokens=tokens,
        times=[now, now - HOUR_MS, now + HOUR_MS],
    )


def signatures(world: World) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for name, regproc, ndefaults, names, types in world.conn.execute(SIGNATURES):
        out.setdefault(name, []).append((regproc, ndefaults, names, types))
    world.conn.rollback()
    return out


# ---------------------------------------------------------------- the property

def check_call(world: World, function: str, types: dict[str, str], documented: set[str], args: dict,
               outcomes: Counter) -> None:
    given_args = {k: v for k, v in args.items() if v is not OMIT}
    call = sql.SQL("SELECT * FROM lonnymq.{}({})").format(
        sql.Identifier(function),
        sql.SQL(", ").join(sql.SQL("{} => %s::{}").format(sql.Identifier(k), sql.SQL(types[k]))
                           for k in given_args))
    values = [materialize(v) for v in given_args.values()]
    shown = f"lonnymq.{function}({', '.join(f'{k} => {v!r}' for k, v in given_args.items())})"
    for kind in sorted({kind for v in given_args.values() for kind in rare_kinds(v)}):
        outcomes[kind] += 1
    conn = world.conn
    before = fingerprint(world)
    try:
        conn.execute(call, values).fetchall()
    except psycopg.Error as e:
        status = conn.info.transaction_status
        conn.rollback()
        outcomes[f"refused {e.sqlstate or 'by the client'}"] += 1
        if e.sqlstate is None:
            # Only psycopg's refusal to send a NUL in text may stop a call
            # before the server: anything else (a lost connection) fails.
            assert isinstance(e, psycopg.DataError) and "NUL" in str(e) and has_nul_text(values), (
                f"{shown}: client-side {type(e).__name__}: {e}")
            assert status != TransactionStatus.INERROR, f"{shown}: {e} reached the server"
        else:
            assert e.sqlstate in documented, (
                f"{shown} raised {e.sqlstate} ({e.diag.message_primary}), "
                f"not on its doc page (documented: {sorted(documented)})")
        after = fingerprint(world)
        changed = {k: f"{before[k]} -> {after[k]}" for k in before if before[k] != after[k]}
        assert not changed, f"{shown} raised {e.sqlstate} but changed {changed}"
        return
    try:
        for statement in QUEUE_WORKS:
            conn.execute(statement).fetchall()
    except psycopg.Error as e:
        conn.rollback()
        raise AssertionError(f"after {shown} (which succeeded), {statement} raised {e.sqlstate}: {e}") from None
    conn.rollback()
    outcomes["succeeded"] += 1


def hypothesis_settings() -> settings:
    return settings(
        max_examples=EXAMPLES,
        derandomize=SEED == "",
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )


def test_every_public_function_has_a_test(world):
    """FUNCTIONS (from the file names) is the catalog's list, and each has a doc page."""
    have = set(signatures(world))
    assert have == set(FUNCTIONS), (
        f"no file: {sorted(have - set(FUNCTIONS))}; not in the catalog: {sorted(set(FUNCTIONS) - have)}")
    for function in FUNCTIONS:
        documented_sqlstates(function)


def test_the_fingerprint_sees_what_a_rollback_leaves(world):
    """The check is not vacuous: what a failed call could leave after its
    ROLLBACK (a sequence drawn, a session's advisory lock) and a changed
    row change the fingerprint."""
    conn = world.conn
    leftovers = {
        "lonnymq.message_id_seq": "SELECT nextval('lonnymq.message_id_seq')",
        "advisory locks this session holds": "SELECT pg_advisory_lock(42)",
    }
    for label, statement in leftovers.items():
        before = fingerprint(world)
        conn.execute(statement)
        conn.rollback()
        after = fingerprint(world)
        assert before[label] != after[label], f"{statement} left {label} as it was"
        assert all(before[k] == after[k] for k in before if k != label), statement
    conn.execute("SELECT pg_advisory_unlock_all()")
    conn.commit()
    before = fingerprint(world)
    conn.execute("UPDATE lonnymq.schedule SET num_runs = num_runs + 1")
    changed = fingerprint(world)  # read in the UPDATE's transaction, then rolled back
    assert before["lonnymq.schedule"] != changed["lonnymq.schedule"]
    assert fingerprint(world) == before


@pytest.mark.parametrize("function", FUNCTIONS)
def test_bad_input_is_refused_with_a_documented_error_and_no_change_or_harmless(world, function):
    documented = documented_sqlstates(function)
    overloads = signatures(world).get(function)
    assert overloads, f"lonnymq.{function} is not in the catalog"
    outcomes: Counter = Counter()
    for regproc, ndefaults, names, types in overloads:
        assert all(names) and len(names) == len(types), f"{regproc}: every parameter needs a name"
        by_name = dict(zip(names, types))

        @hypothesis_settings()
        @given(args=arguments(world, names, types, ndefaults))
        def prop(args):
            check_call(world, function, by_name, documented, args, outcomes)

        if SEED not in ("", "random"):
            prop = seed(int(SEED))(prop)
        prop()
    # Shown with -s (or -rP): what the examples did.
    calls = sum(n for k, n in outcomes.items() if not k.startswith("with "))
    print(f"\n{function}: {calls} calls, {dict(sorted(outcomes.items()))}")
