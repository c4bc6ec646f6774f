"""The benchmark's scenarios (variants), their fixtures and the state resets.

A *variant* is one line on the throughput plot: a workload run at each client
count.  Variants of one *group* share a table in the report.

Fixtures that would take minutes through the API (a million messages, ten
thousand saturated channels) are written straight into lonnymq's tables, in
exactly the state the API would leave them in; each fixture says how.  The
clients themselves only ever call the public functions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from psycopg import sql

from lonnymq_dev.limits import DAY_MS

from bench.clients import BASELINE_DDL, BASELINE_TABLE, FLOOR_DDL, FLOOR_SCHEMA, NOW_US, Workload

READY_CHANNEL = "bench"


@dataclass
class Variant:
    key: str
    group: str
    title: str
    workload: Workload
    setup: Callable | None = None  # setup(conn, variant) on a fresh extension
    fresh_per_run: bool = True  # fresh state before every client count (else VACUUM between)
    baseline: bool = False
    backlog: int | None = None  # for the cost-against-backlog plot
    notes: str = ""
    params: dict = field(default_factory=dict)


GROUPS = {
    "baseline": "Baselines: plain table, FOR UPDATE SKIP LOCKED",
    "lifecycle": "1. Lifecycle, one channel (create, dequeue, complete; unbatched)",
    "channels": "2. Lifecycle, 64 channels",
    "batch": "3. Batched (create / dequeue / complete N per statement)",
    "backlog": "4. Backlog scaling (lifecycle on top of a standing backlog)",
    "saturated": "5. Saturated channels (lifecycle on one ready channel)",
    "worker": "7. Worker loop (create; message_complete_dequeue: two calls per message)",
    "held": "6. Held snapshot (a REPEATABLE READ transaction left open during the churn)",
}
HELD_GROUP = "held"
HELD_BACKLOG = 10_000  # the standing backlog the held-snapshot variants over a backlog start with
HELD_CHANNELS_MANY = 10_000  # the channels of the held-snapshot variants with many channels


# --------------------------------------------------------------------- state resets

def reset_lonnymq(conn, version: str | None = None) -> None:
    """A fresh, empty lonnymq (and no baseline table): its default version, or
    `version` (BENCH_VERSIONS)."""
    conn.execute(f"DROP TABLE IF EXISTS {BASELINE_TABLE}")
    conn.execute(f"DROP SCHEMA IF EXISTS {FLOOR_SCHEMA} CASCADE")
    conn.execute("DROP EXTENSION IF EXISTS lonnymq CASCADE")
    if version:
        conn.execute(sql.SQL("CREATE EXTENSION lonnymq VERSION {}").format(sql.Literal(version)))
    else:
        conn.execute("CREATE EXTENSION lonnymq")


def reset_baseline(conn, floor: bool = False) -> None:
    conn.execute("DROP EXTENSION IF EXISTS lonnymq CASCADE")
    conn.execute(f"DROP SCHEMA IF EXISTS {FLOOR_SCHEMA} CASCADE")
    for stmt in BASELINE_DDL.strip().split(";"):
        if stmt.strip():
            conn.execute(stmt)
    if floor:
        conn.execute(FLOOR_DDL)


def vacuum_queue(conn, baseline: bool) -> None:
    if baseline:
        conn.execute(f"VACUUM ANALYZE {BASELINE_TABLE}")
        if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{FLOOR_SCHEMA}.m",)).fetchone()[0]:
            conn.execute(f"VACUUM ANALYZE {FLOOR_SCHEMA}.m")
    else:
        for t in ("message", "channel", "channel_wake", "channel_quota"):
            if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"lonnymq.{t}",)).fetchone()[0]:
                conn.execute(f"VACUUM ANALYZE lonnymq.{t}")


# --------------------------------------------------------------------- fixtures

def setup_channels(conn, names: list[str], max_concurrency: int | None = None, chunk: int = 1000) -> None:
    """channel_set of each name, `chunk` a statement (each its own transaction):
    a channel_set holds a lock on its channel until the transaction ends (an
    advisory lock, since 0.11.1), and ten thousand in one transaction overflow
    the lock table (max_locks_per_transaction)."""
    for i in range(0, len(names), chunk):
        conn.execute(
            "SELECT lonnymq.channel_set(n, p_max_concurrency => %s) FROM unnest(%s::text[]) AS n",
            (max_concurrency, names[i:i + chunk]),
        )


def _fill(conn, channel: str, n: int, dequeue_at_sql: str) -> None:
    """n messages in `channel` (empty content: no latency sample), dated
    `dequeue_at_sql`, through message_create_batch, 10,000 a call: the API of
    every version the bench compares, so that each version's own data model
    holds them as its functions leave it."""
    conn.execute(
        f"""
        SELECT count(*)
        FROM (SELECT {dequeue_at_sql} AS at) AS t,
            generate_series(0, (%(n)s - 1) / 10000) AS g,
            LATERAL lonnymq.message_create_batch(
                %(channel)s,
                array_fill('\\x'::bytea, ARRAY[LEAST(10000, %(n)s - g * 10000)]),
                array_fill(t.at, ARRAY[LEAST(10000, %(n)s - g * 10000)])
            )
        WHERE %(n)s > 0
        """,
        {"n": n, "channel": channel},
    )


def setup_ready_backlog(conn, variant: Variant) -> None:
    """`backlog` ready messages spread evenly over the clients' channels (the one
    channel `bench` unless the workload names others), dated a minute ago so that
    they are ahead of everything the clients create (FIFO)."""
    n = variant.backlog
    channels = list(variant.workload.channels)
    setup_channels(conn, channels)
    for i, channel in enumerate(channels):
        share = n // len(channels) + (1 if i < n % len(channels) else 0)
        if share == 0:
            continue
        conn.execute(
            "SELECT lonnymq.message_create(%s, '\\x'::bytea, lonnymq.to_epoch(now()) - 60000)",
            (channel,),
        )
        if share > 1:
            _fill(conn, channel, share - 1, "lonnymq.to_epoch(now()) - 60000")


def setup_baseline_backlog(conn, variant: Variant) -> None:
    """`backlog` rows in the plain table, ahead of everything the clients insert
    (ORDER BY id: FIFO), like lonnymq's ready backlog."""
    conn.execute(
        f"INSERT INTO {BASELINE_TABLE} (created_us, payload) "
        f"SELECT {NOW_US}, '\\x'::bytea FROM generate_series(1, %s)",
        (variant.backlog,),
    )


def fresh_backlog(conn, kind: str, n: int, version: str | None = None) -> None:
    """A fresh queue holding n ready messages for a loop of bench/pgbench_worker.py
    or bench/plan_counts.py: the plain table (`amo`), the floor (`floor_worker`),
    or lonnymq (its default version, or `version`), in its channel `bench`
    (any other kind)."""
    if kind in ("amo", "floor_worker"):
        reset_baseline(conn, floor=kind == "floor_worker")
    else:
        reset_lonnymq(conn, version)
    if kind == "amo":
        conn.execute(f"INSERT INTO {BASELINE_TABLE} (created_us, payload) "
                     "SELECT 0, '\\x00' FROM generate_series(1, %s)", (n,))
    elif kind == "floor_worker":
        conn.execute(f"SELECT count({FLOOR_SCHEMA}.create('\\x00')) FROM generate_series(1, %s)", (n,))
    elif kind.startswith("worker_16ch"):
        # (bench/pgbench_worker.py's 16-channel loops: bench0 to bench15.)
        if kind.endswith("_limited"):
            conn.execute("SELECT count(lonnymq.channel_set('bench' || g, p_max_concurrency => 4)) "
                         "FROM generate_series(0, 15) AS g")
        conn.execute("SELECT count(*) FROM generate_series(0, 15) AS g, lonnymq.message_create_batch("
                     "'bench' || g, array_fill('\\x00'::bytea, ARRAY[%s])) AS c", (n // 16,))
    else:
        conn.execute("SELECT count(*) FROM lonnymq.message_create_batch('bench', "
                     "array_fill('\\x00'::bytea, ARRAY[%s]))", (n,))
    conn.execute("VACUUM ANALYZE")


def setup_future_backlog(conn, variant: Variant) -> None:
    """1M messages dated a day ahead: 900k in the clients' channel (indexed after its
    few ready messages) and 100k in 1,000 other channels (100 each, each channel
    created by a message_create of a future message, so its wake-up is a day
    ahead).  The clients' own messages are the few ready ones."""
    n = variant.backlog
    others = variant.params.get("other_channels", 1000)
    per_other = variant.params.get("per_other", 100)
    in_ready = n - others * per_other
    future = f"lonnymq.to_epoch(now()) + {DAY_MS}"
    setup_channels(conn, [READY_CHANNEL])
    conn.execute(f"SELECT lonnymq.message_create(%s, '\\x'::bytea, {future})", (READY_CHANNEL,))
    _fill(conn, READY_CHANNEL, in_ready - 1, future)
    conn.execute(
        f"SELECT lonnymq.message_create('future-' || lpad(g::text, 5, '0'), '\\x'::bytea, {future}) "
        "FROM generate_series(1, %s) AS g",
        (others,),
    )
    conn.execute(
        f"""
        SELECT count(*)
        FROM generate_series(1, %s) AS g,
            LATERAL lonnymq.message_create_batch(
                'future-' || lpad(g::text, 5, '0'),
                array_fill('\\x'::bytea, ARRAY[%s]),
                array_fill({future}, ARRAY[%s])
            )
        """,
        (others, per_other - 1, per_other - 1),
    )


def setup_saturated(conn, variant: Variant) -> None:
    """`channels` channels with max_concurrency 1, each holding one message locked
    for a day (so at its limit, next turn a day ahead) and one ready message
    behind it; plus the clients' unconstrained channel.

    Built through the API: channel_set, two messages per channel
    (message_create_batch), then message_dequeue with a one-day lock, 1000 at a
    time, until nothing is deliverable: the API saturates them."""
    n = variant.params["channels"]
    names = [f"sat-{i:05d}" for i in range(1, n + 1)]
    setup_channels(conn, names, max_concurrency=1)
    conn.execute(
        """
        SELECT count(*)
        FROM unnest(%s::text[]) AS n,
            LATERAL lonnymq.message_create_batch(
                n, ARRAY['\\x', '\\x']::bytea[],
                ARRAY[lonnymq.to_epoch(now()) - 60000, lonnymq.to_epoch(now()) - 60000]
            )
        """,
        (names,),
    )
    for _ in range(4 * n // 1000 + 10):
        got = conn.execute(f"SELECT count(*) FROM lonnymq.message_dequeue({DAY_MS}, 1000)").fetchone()[0]
        if got == 0:
            break
    # Saturated: one lock a day long and one ready message in each channel
    # (read from the messages, the same in every version).
    saturated = conn.execute(
        """
        SELECT count(*) FROM (
            SELECT m.channel_id
            FROM lonnymq.message AS m
            GROUP BY m.channel_id
            HAVING count(*) FILTER (WHERE m.is_locked AND m.dequeue_at > lonnymq.to_epoch(now()) + %s) = 1
                AND count(*) FILTER (WHERE NOT m.is_locked) = 1
        ) AS s
        """,
        (DAY_MS // 2,),
    ).fetchone()[0]
    if saturated != n:
        raise RuntimeError(f"saturated fixture: {saturated} of {n} channels saturated")
    setup_channels(conn, [READY_CHANNEL])


def setup_lifecycle(conn, variant: Variant) -> None:
    setup_channels(conn, list(variant.workload.channels), variant.params.get("max_concurrency"))


# --------------------------------------------------------------------- the catalogue

def catalogue(backlogs: list[int], saturated_channels: int) -> list[Variant]:
    """Every variant, in the order they run."""
    ch64 = tuple(f"ch-{i:02d}" for i in range(64))
    out = [
        Variant("baseline_amo", "baseline", "at-most-once: DELETE … (SELECT … SKIP LOCKED LIMIT 1) RETURNING",
                Workload("amo"), baseline=True),
        Variant("baseline_alo", "baseline", "at-least-once: SELECT … FOR UPDATE SKIP LOCKED, DELETE, COMMIT",
                Workload("alo"), baseline=True),
        Variant("baseline_floor", "baseline",
                "floor: three minimal PL/pgSQL calls (INSERT; UPDATE … SKIP LOCKED with a lock expiry; DELETE)",
                Workload("floor"), baseline=True),
        Variant("baseline_floor_worker", "baseline",
                "floor worker loop: the floor's INSERT, and one minimal call that completes and fetches",
                Workload("floor_worker"), baseline=True),
        Variant("lifecycle_1ch", "lifecycle", "one channel", Workload("lifecycle"), setup_lifecycle),
        Variant("lifecycle_64ch", "channels", "64 channels, no limits",
                Workload("lifecycle", channels=ch64), setup_lifecycle),
        Variant("lifecycle_64ch_mc2", "channels", "64 channels, max_concurrency 2",
                Workload("lifecycle", channels=ch64), setup_lifecycle, params={"max_concurrency": 2}),
        Variant("batch_10", "batch", "batches of 10", Workload("batch", batch=10), setup_lifecycle),
        Variant("batch_100", "batch", "batches of 100", Workload("batch", batch=100), setup_lifecycle),
        Variant("worker_1ch", "worker", "worker loop, one channel", Workload("worker"), setup_lifecycle),
        Variant("worker_64ch", "worker", "worker loop, 64 channels, no limits", Workload("worker", channels=ch64),
                setup_lifecycle),
        Variant("worker_batch_100", "worker", "worker loop, batches of 100, one channel", Workload("worker", batch=100),
                setup_lifecycle),
        Variant("worker_batch_100_64ch", "worker", "worker loop, batches of 100, 64 channels",
                Workload("worker", batch=100, channels=ch64), setup_lifecycle),
    ]
    for n in backlogs:
        out.append(Variant(
            f"backlog_{_short(n)}", "backlog", f"{n:,} ready messages", Workload("lifecycle"),
            setup_ready_backlog, fresh_per_run=False, backlog=n,
        ))
    if backlogs:
        n = max(backlogs)
        others = 1000 if n >= 200_000 else max(1, n // 1000)
        out.append(Variant(
            f"backlog_{_short(n)}_future", "backlog",
            f"{n:,} future-dated messages, a few ready", Workload("lifecycle"),
            setup_future_backlog, fresh_per_run=False, backlog=n,
            params={"other_channels": others, "per_other": 100 if n >= 200_000 else max(1, n // (10 * others))},
        ))
    out.append(Variant(
        "saturated", "saturated", f"{saturated_channels:,} channels at max_concurrency + 1 ready channel",
        Workload("lifecycle"), setup_saturated, fresh_per_run=False,
        params={"channels": saturated_channels},
    ))
    out.append(Variant("baseline_amo_end", "baseline", "at-most-once, again at the end (drift check)",
                       Workload("amo"), baseline=True))
    # 6. Held snapshot: one long run each at a fixed 8 clients (bench/held.py),
    # not one run per client count; after everything else, as it is the longest.
    out += held_variants(ch64)
    return out


def held_variants(ch64: tuple[str, ...]) -> list[Variant]:
    """Scenario 6: each workload (one channel, 64 channels, 10,000 channels,
    batches of 50, and the at-most-once plain table for reference) twice: over
    a standing ready backlog of HELD_BACKLOG messages (`held_<shape>`: the
    clients keep its size, each creating one message per message it consumes),
    and with consumers keeping up (`held_empty_<shape>`: no backlog; each client
    creates its message, or batch, then takes one, or a batch: the queue stays
    near empty).  The two differ only by their setup."""
    many = tuple(f"ch-{i:05d}" for i in range(HELD_CHANNELS_MANY))
    shapes = [  # key suffix, title, workload
        ("1ch", "one channel", Workload("lifecycle")),
        ("64ch", "64 channels", Workload("lifecycle", channels=ch64)),
        (f"{_short(HELD_CHANNELS_MANY)}ch", f"{HELD_CHANNELS_MANY:,} channels", Workload("lifecycle", channels=many)),
        ("batch50", "batches of 50", Workload("batch", batch=50)),
        ("amo", "at-most-once plain table", Workload("amo")),
    ]
    out = []
    for prefix, queue, backlog in (("held", f"over a {HELD_BACKLOG:,}-message backlog", HELD_BACKLOG),
                                   ("held_empty", "near-empty queue", 0)):
        for suffix, title, wl in shapes:
            baseline = wl.kind == "amo"
            if backlog:
                setup = setup_baseline_backlog if baseline else setup_ready_backlog
            else:  # the plain table needs nothing; lonnymq its channels
                setup = None if baseline else setup_lifecycle
            out.append(Variant(f"{prefix}_{suffix}", HELD_GROUP, f"{title}, {queue}", wl, setup,
                               baseline=baseline, backlog=backlog))
    return out


def _short(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


ALIASES = {
    "all": None,
    "baselines": ["baseline_amo", "baseline_alo", "baseline_floor", "baseline_floor_worker", "baseline_amo_end"],
}


def select(variants: list[Variant], spec: str | None) -> list[Variant]:
    """BENCH_SCENARIOS: comma-separated variant keys, group names (baseline,
    lifecycle, channels, batch, backlog, saturated, held, worker), scenario numbers 1-7,
    or all."""
    if not spec or spec.strip() == "all":
        return variants
    numbers = {"1": "lifecycle", "2": "channels", "3": "batch", "4": "backlog", "5": "saturated", "6": "held",
               "7": "worker"}
    wanted: set[str] = set()
    for tok in (t.strip() for t in spec.split(",")):
        if not tok:
            continue
        tok = numbers.get(tok, tok)
        keys = [v.key for v in variants if v.key == tok or v.group == tok]
        if tok in ALIASES and ALIASES[tok]:
            keys += ALIASES[tok]
        if not keys:
            raise SystemExit(
                f"unknown scenario {tok!r}; known: {', '.join(v.key for v in variants)} "
                f"or groups {', '.join(GROUPS)}"
            )
        wanted.update(keys)
    return [v for v in variants if v.key in wanted]


def wait_stats_flush(seconds: float = 0.6) -> None:
    """Backends flush their table statistics when they exit; give them a moment."""
    time.sleep(seconds)
