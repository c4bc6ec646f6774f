"""Client processes of the benchmark: one process and one connection per client.

Every client runs one *workload* (a loop of SQL calls) for warm-up + duration
seconds after all clients of the run are connected, and reports what it did in
the measurement window (after the warm-up) through a queue:

    consumed   messages consumed (completed, or deleted by a baseline)
    empty      dequeue calls that returned nothing
    errors     SQL errors (counted; the loop goes on)
    latency_us create-to-dequeue latency of each consumed message, in µs, both
               ends read from the server's clock_timestamp() (the creation
               time travels in the message: 8 bytes, int8send of epoch µs)
    calls      per call type (create / dequeue / complete): count, total
               seconds and a sample of durations, measured in the client
    cpu        CPU seconds spent in the window (from its first measured
               iteration to the loop's end) by this client process
               (getrusage), by its server backend (/proc/PID/stat, when
               the server runs on this machine) and by the whole machine
               (/proc/stat), with the window's wall-clock seconds

lonnymq's dequeue, completes and worker call are lonnymq_dev.calls', the
ones the tests make; the creates (whose content is the creation time), the
plain-table baselines and the floor's functions are in this file.  Batches
use lonnymq 0.2.0's message_create_batch and message_complete_batch.
"""

from __future__ import annotations

import functools
import itertools
import os
import resource
import time
import traceback
from dataclasses import dataclass, field

import psycopg

from lonnymq_dev import calls
from lonnymq_dev.limits import LOCK_MS

# The server's wall clock in epoch microseconds, as SQL.
NOW_US = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
# A message's content: its creation time (8 bytes, big-endian epoch µs).
CONTENT_NOW = f"int8send({NOW_US})"

BASELINE_TABLE = "bench_queue"
MAX_CALL_SAMPLES = 20_000  # per call type and client


@dataclass
class Workload:
    """What one run's clients do.

    kind:      "lifecycle" (lonnymq create + dequeue + complete, batch 1),
               "batch" (lonnymq, batches of `batch`), "worker" (lonnymq create
               + message_complete_dequeue, batches of `batch`), "amo" / "alo"
               (baselines),
               "floor" (three minimal PL/pgSQL queue calls, a reference),
               "floor_worker" (the floor's create, and one call that
               completes and fetches: the worker loop's reference)
    channels:  channels a lifecycle/batch client creates into, round-robin
    batch:     messages per create / dequeue / complete batch
    """

    kind: str
    channels: tuple[str, ...] = ("bench",)
    batch: int = 1
    session_sql: tuple[str, ...] = field(default_factory=tuple)  # run once per connection


def decode_created_us(content) -> int | None:
    """The creation time carried by a benchmark message (None for prefilled fixtures)."""
    if content is None or len(content) != 8:
        return None
    return int.from_bytes(bytes(content), "big", signed=True)


class _Stats:
    def __init__(self) -> None:
        self.consumed = 0
        self.empty = 0
        self.errors = 0
        self.error_samples: list[str] = []
        self.latency_us: list[int] = []
        self.calls: dict[str, list] = {}  # type -> [count, total_s, samples]
        self.backend_pid: int | None = None
        self._cpu0: tuple | None = None
        self.cpu: dict | None = None

    def cpu_snapshot(self) -> tuple:
        """(wall, client CPU s, backend CPU s or None, machine busy CPU s or None)."""
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return (time.monotonic(), ru.ru_utime + ru.ru_stime,
                backend_cpu_s(self.backend_pid), machine_busy_s())

    def cpu_begin(self) -> None:
        self._cpu0 = self.cpu_snapshot()

    def cpu_end(self) -> None:
        if self._cpu0 is None:
            return
        a, b = self._cpu0, self.cpu_snapshot()
        self.cpu = {
            "wall_s": b[0] - a[0],
            "client_s": b[1] - a[1],
            "backend_s": None if a[2] is None or b[2] is None else b[2] - a[2],
            "machine_s": None if a[3] is None or b[3] is None else b[3] - a[3],
        }

    def call(self, kind: str, seconds: float, n: int = 1) -> None:
        c = self.calls.setdefault(kind, [0, 0.0, []])
        c[0] += n
        c[1] += seconds
        if len(c[2]) < MAX_CALL_SAMPLES:
            c[2].append(seconds)

    def as_dict(self) -> dict:
        return {
            "consumed": self.consumed,
            "empty": self.empty,
            "errors": self.errors,
            "error_samples": self.error_samples[:5],
            "latency_us": self.latency_us,
            "calls": {k: {"count": v[0], "total_s": v[1], "samples": v[2]} for k, v in self.calls.items()},
            "cpu": self.cpu,
        }


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def backend_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of a local process (a server backend), or None
    when it cannot be read (a remote server, another OS)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


def machine_busy_s() -> float | None:
    """CPU seconds the whole machine spent busy (all CPUs, /proc/stat: user,
    nice, system, irq and softirq; not idle, iowait or steal), or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:8]]
        return (v[0] + v[1] + v[2] + v[5] + v[6]) / _TICK
    except (OSError, IndexError, ValueError):
        return None


def _iterations(stats: _Stats, window: float, end: float):
    """One value per iteration of a client's loop until `end`: whether the
    iteration is measured (see _measuring)."""
    while (now := time.monotonic()) < end:
        yield _measuring(stats, now, window)


def _rotation(channels: tuple[str, ...], index: int):
    """The channels a client creates into, round-robin from its own offset."""
    return itertools.islice(itertools.cycle(channels), index % len(channels), None)


def _measuring(stats: _Stats, now: float, window: float) -> bool:
    """Whether this iteration is in the measurement window; the first one that
    is takes the CPU snapshot the window's CPU figures start from."""
    if now < window:
        return False
    if stats._cpu0 is None:
        stats.cpu_begin()
    return True


# --------------------------------------------------------------------- lonnymq calls
# The dequeue, the completes and the worker's call are lonnymq_dev.calls',
# with its lock (lonnymq_dev.limits.LOCK_MS, a minute: it never expires
# during a run).  The benchmark's own: the creates, whose content is the
# creation time, and the columns a take reads (TAKEN: the id, the token,
# the content and the server's clock at the take, for the create-to-dequeue
# latency).

SQL_CREATE = f"SELECT lonnymq.message_create(%s, {CONTENT_NOW})"
TAKEN = f"id, num_attempts, content, {NOW_US}"


def create_one(cur, channel: str) -> None:
    cur.execute(SQL_CREATE, (channel,))


def dequeue(cur, limit: int) -> list[tuple]:
    return calls.dequeue(cur, LOCK_MS, limit, columns=TAKEN)


# One message_create_batch call: one statement, one transaction, one INSERT.
def create_batch(cur, channel: str, n: int) -> None:
    cur.execute(
        f"SELECT count(*) FROM lonnymq.message_create_batch(%s, array_fill({CONTENT_NOW}, ARRAY[%s]))",
        (channel, n),
    )


# The worker's call (lonnymq 0.10.0): completes what the last call delivered
# and takes the next; each refused complete is a NOTICE (SQLSTATE 01LQ1).
REFUSED = "01LQ1"


def complete_dequeue(cur, deliveries: list[tuple], limit: int) -> list[tuple]:
    return calls.complete_dequeue(cur, deliveries, LOCK_MS, limit, columns=TAKEN)


# --------------------------------------------------------------------- baselines

BASELINE_DDL = f"""
DROP TABLE IF EXISTS {BASELINE_TABLE};
CREATE TABLE {BASELINE_TABLE} (
    id bigserial PRIMARY KEY,
    created_us bigint NOT NULL,
    payload bytea NOT NULL
);
"""
SQL_BASE_INSERT = f"INSERT INTO {BASELINE_TABLE} (created_us, payload) VALUES ({NOW_US}, {CONTENT_NOW})"
# at-most-once: the message is gone when the consumer gets it.
SQL_BASE_AMO = (
    f"DELETE FROM {BASELINE_TABLE} WHERE id = ("
    f"SELECT id FROM {BASELINE_TABLE} ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1"
    f") RETURNING id, created_us, {NOW_US}"
)
# at-least-once: lock, (work), delete, commit -- one transaction.
SQL_BASE_LOCK = (
    f"SELECT id, created_us, {NOW_US} FROM {BASELINE_TABLE} "
    "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1"
)
SQL_BASE_DELETE = f"DELETE FROM {BASELINE_TABLE} WHERE id = %s"

# The floor: what three PL/pgSQL calls (create, dequeue, complete) cost with
# nothing but the minimum of a queue whose locks expire, on a table shaped
# like lonnymq.message: no channels, rotation, wake-ups, schedules, guard,
# dead letters or keys.  A reference for what the API's shape costs
# (bench/README.md), measured in the same run.  One string: the function
# bodies hold semicolons.
FLOOR_SCHEMA = "bench_floor"
# The floor's take, in its dequeue and in its worker loop's complete_dequeue.
FLOOR_TAKE = f"""    UPDATE {FLOOR_SCHEMA}.m AS m
    SET dequeue_at = v_now + p_lock_ms, is_locked = true, num_attempts = m.num_attempts + 1
    WHERE m.id = (
        SELECT q.id FROM {FLOOR_SCHEMA}.m AS q
        WHERE q.channel_id = 1 AND q.dequeue_at <= v_now
        ORDER BY q.dequeue_at, q.id LIMIT 1 FOR UPDATE SKIP LOCKED
    )
    RETURNING m.id, m.num_attempts, m.content INTO id, num_attempts, content;
"""
FLOOR_DDL = f"""
DROP SCHEMA IF EXISTS {FLOOR_SCHEMA} CASCADE;
CREATE SCHEMA {FLOOR_SCHEMA};
CREATE TABLE {FLOOR_SCHEMA}.m (
    id bigserial PRIMARY KEY,
    channel_id bigint NOT NULL,
    dequeue_at bigint NOT NULL,
    is_locked boolean NOT NULL DEFAULT false,
    num_attempts integer NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    content bytea NOT NULL
) WITH (fillfactor = 70);
CREATE INDEX ON {FLOOR_SCHEMA}.m (channel_id, dequeue_at, id);
CREATE FUNCTION {FLOOR_SCHEMA}.create(p_content bytea) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE v_id bigint;
BEGIN
    INSERT INTO {FLOOR_SCHEMA}.m (channel_id, dequeue_at, created_at, content)
    VALUES (1, (extract(epoch FROM now()) * 1000)::bigint,
            (extract(epoch FROM clock_timestamp()) * 1000)::bigint, p_content)
    RETURNING id INTO v_id;
    RETURN v_id;
END $$;
CREATE FUNCTION {FLOOR_SCHEMA}.dequeue(p_lock_ms bigint, OUT id bigint, OUT num_attempts integer, OUT content bytea)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE v_now bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
{FLOOR_TAKE}END $$;
CREATE FUNCTION {FLOOR_SCHEMA}.complete_dequeue(
    p_ids bigint[], p_num_attempts integer[], p_lock_ms bigint, OUT id bigint, OUT num_attempts integer, OUT content bytea)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE v_now bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
    DELETE FROM {FLOOR_SCHEMA}.m AS m
    USING ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_num_attempts)) AS t (id, num_attempts)
    WHERE m.id = t.id AND m.num_attempts = t.num_attempts AND m.is_locked;
{FLOOR_TAKE}END $$;
CREATE FUNCTION {FLOOR_SCHEMA}.complete(p_id bigint, p_num_attempts integer) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM {FLOOR_SCHEMA}.m AS m WHERE m.id = p_id AND m.num_attempts = p_num_attempts AND m.is_locked;
    RETURN FOUND;
END $$;
"""
SQL_FLOOR_CREATE = f"SELECT {FLOOR_SCHEMA}.create({CONTENT_NOW})"
SQL_FLOOR_DEQUEUE = (
    f"SELECT d.id, d.num_attempts, d.content, {NOW_US} FROM {FLOOR_SCHEMA}.dequeue(%s) AS d WHERE d.id IS NOT NULL"
)
SQL_FLOOR_COMPLETE = f"SELECT {FLOOR_SCHEMA}.complete(%s, %s)"


SQL_FLOOR_COMPLETE_DEQUEUE = (
    f"SELECT d.id, d.num_attempts, d.content, {NOW_US} "
    f"FROM {FLOOR_SCHEMA}.complete_dequeue(%s::bigint[], %s::integer[], %s) AS d WHERE d.id IS NOT NULL"
)


def floor_create(cur, channel: str) -> None:  # one table, no channels
    cur.execute(SQL_FLOOR_CREATE)


def floor_dequeue(cur, limit: int) -> list[tuple]:  # always one
    cur.execute(SQL_FLOOR_DEQUEUE, (LOCK_MS,))
    return cur.fetchall()


def floor_complete(cur, mid: int, token: int) -> bool:
    cur.execute(SQL_FLOOR_COMPLETE, (mid, token))
    return bool(cur.fetchone()[0])


def floor_complete_dequeue(cur, deliveries: list[tuple], limit: int) -> list[tuple]:  # always one
    cur.execute(SQL_FLOOR_COMPLETE_DEQUEUE, ([d[0] for d in deliveries], [d[1] for d in deliveries], LOCK_MS))
    return cur.fetchall()


# --------------------------------------------------------------------- the loop

def client_main(
    index: int,
    dsn: str,
    workload: Workload,
    warmup: float,
    duration: float,
    barrier,
    progress,
    out_queue,
) -> None:
    """Entry point of one client process."""
    stats = _Stats()
    try:
        conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0)
    except Exception as exc:  # noqa: BLE001
        barrier.abort()
        out_queue.put({"index": index, "fatal": f"connect: {exc}"})
        return
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SET application_name = 'lonnymq-bench'")
            for stmt in workload.session_sql:
                try:
                    cur.execute(stmt)
                except psycopg.Error:
                    pass  # profiling settings are optional (not superuser, no extension)
            barrier.wait(timeout=120)
            start = time.monotonic()
            window = start + warmup
            end = window + duration
            loop = _LOOPS[workload.kind]
            stats.backend_pid = conn.info.backend_pid
            loop(cur, conn, index, workload, window, end, stats, progress)
            stats.cpu_end()
    except Exception as exc:  # noqa: BLE001
        out_queue.put({"index": index, "fatal": "".join(traceback.format_exception(exc))[-2000:]})
        return
    out_queue.put({"index": index, **stats.as_dict()})


def _error(stats: _Stats, conn, exc: Exception) -> None:
    stats.errors += 1
    if len(stats.error_samples) < 5:
        stats.error_samples.append(f"{type(exc).__name__}: {exc}".strip()[:300])
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        conn.rollback()


def _consumed(stats: _Stats, rows, created_idx: int, now_idx: int, from_content: bool) -> None:
    for row in rows:
        created = decode_created_us(row[created_idx]) if from_content else row[created_idx]
        if created is not None:
            stats.latency_us.append(row[now_idx] - created)


def _loop_lifecycle(cur, conn, index, wl: Workload, window, end, stats, progress,
                    steps=(create_one, dequeue, calls.complete)):
    """Create one, dequeue one, complete it; `steps` are the three calls (the
    floor passes its own)."""
    create, take, complete = steps
    clock = time.perf_counter
    channels = _rotation(wl.channels, index)
    total = 0
    for measuring in _iterations(stats, window, end):
        try:
            channel = next(channels)
            t0 = clock()
            create(cur, channel)
            t1 = clock()
            rows = take(cur, 1)
            t2 = clock()
            ok = False
            if rows:
                ok = complete(cur, rows[0][0], rows[0][1])
            t3 = clock()
        except psycopg.Error as exc:
            if measuring:
                _error(stats, conn, exc)
            continue
        if rows and ok:
            total += 1
        if measuring and time.monotonic() < end:
            stats.call("create", t1 - t0)
            stats.call("dequeue", t2 - t1)
            if rows:
                stats.call("complete", t3 - t2)
                if ok:
                    stats.consumed += 1
                    _consumed(stats, rows, 2, 3, True)
            else:
                stats.empty += 1
        progress[index] = total


def _loop_batch(cur, conn, index, wl: Workload, window, end, stats, progress):
    clock = time.perf_counter
    channels = _rotation(wl.channels, index)
    n = wl.batch
    total = 0
    for measuring in _iterations(stats, window, end):
        try:
            channel = next(channels)
            t0 = clock()
            create_batch(cur, channel, n)
            t1 = clock()
            rows = dequeue(cur, n)
            t2 = clock()
            done = 0
            if rows:
                done = calls.complete_batch(cur, rows)
            t3 = clock()
        except psycopg.Error as exc:
            if measuring:
                _error(stats, conn, exc)
            continue
        total += done
        if measuring and time.monotonic() < end:
            stats.call("create", t1 - t0, n)
            stats.call("dequeue", t2 - t1, len(rows) or 1)
            if rows:
                stats.call("complete", t3 - t2, len(rows))
                stats.consumed += done
                _consumed(stats, rows, 2, 3, True)
            else:
                stats.empty += 1
        progress[index] = total


def _loop_worker(cur, conn, index, wl: Workload, window, end, stats, progress,
                 steps=(create_one, complete_dequeue)):
    """Create `batch` (one message_create, or one message_create_batch), then
    one message_complete_dequeue that completes what the previous one
    delivered and takes up to `batch`: two calls, two commits.  `steps`: the
    unbatched create and the complete-and-dequeue (the floor passes its own)."""
    create, take = steps
    clock = time.perf_counter
    channels = _rotation(wl.channels, index)
    n = wl.batch
    total = 0
    refused = [0]
    conn.add_notice_handler(lambda d: refused.__setitem__(0, refused[0] + (d.sqlstate == REFUSED)))
    held: list[tuple] = []  # delivered by the last call, completed by the next
    for measuring in _iterations(stats, window, end):
        try:
            channel = next(channels)
            t0 = clock()
            if n == 1:
                create(cur, channel)
            else:
                create_batch(cur, channel, n)
            t1 = clock()
            before = refused[0]
            rows = take(cur, held, n)
            t2 = clock()
        except psycopg.Error as exc:
            if measuring:
                _error(stats, conn, exc)
            continue
        done = len(held) - (refused[0] - before)
        completed, held = held, rows
        total += done
        if measuring and time.monotonic() < end:
            stats.call("create", t1 - t0, n)
            stats.call("dequeue", t2 - t1, len(rows) or 1)  # complete and dequeue in one call
            stats.consumed += done
            _consumed(stats, completed, 2, 3, True)
            if not rows:
                stats.empty += 1
        progress[index] = total


def _loop_base(cur, conn, index, wl: Workload, window, end, stats, progress, at_most_once=True):
    """The plain-table baselines: an INSERT, then at most once one DELETE ...
    SKIP LOCKED RETURNING (dequeue and complete in one statement), or at least
    once, in a transaction, SELECT ... FOR UPDATE SKIP LOCKED and a DELETE of
    what it locked."""
    clock = time.perf_counter
    total = 0
    for measuring in _iterations(stats, window, end):
        try:
            t0 = clock()
            cur.execute(SQL_BASE_INSERT)
            t1 = clock()
            if at_most_once:
                cur.execute(SQL_BASE_AMO)
                rows = cur.fetchall()
                t2 = t3 = clock()
            else:
                with conn.transaction():
                    cur.execute(SQL_BASE_LOCK)
                    rows = cur.fetchall()
                    t2 = clock()
                    if rows:
                        cur.execute(SQL_BASE_DELETE, (rows[0][0],))
                t3 = clock()
        except psycopg.Error as exc:
            if measuring:
                _error(stats, conn, exc)
            continue
        total += len(rows)
        if measuring and time.monotonic() < end:
            stats.call("create", t1 - t0)
            stats.call("dequeue", t2 - t1)
            if rows:
                if not at_most_once:
                    stats.call("complete", t3 - t2)
                stats.consumed += len(rows)
                _consumed(stats, rows, 1, 2, False)
            else:
                stats.empty += 1
        progress[index] = total


_LOOPS = {
    "lifecycle": _loop_lifecycle,
    "floor": functools.partial(_loop_lifecycle, steps=(floor_create, floor_dequeue, floor_complete)),
    "batch": _loop_batch,
    "worker": _loop_worker,
    "floor_worker": functools.partial(_loop_worker, steps=(floor_create, floor_complete_dequeue)),
    "amo": _loop_base,
    "alo": functools.partial(_loop_base, at_most_once=False),
}
