"""Soak: many producers and consumers on many channels with mixed limits.

Producers (each its own connection) create messages in transactions of 10 to
40 ``message_create`` calls (and some single autocommit creates), with a
unique payload, some scheduled a few hundred ms ahead, some prioritised (past,
zero or negative ``dequeue_at``). Consumers dequeue (p_limit 1 or a small
batch, any channel or a named one) and, per message, complete it, defer it
(sometimes saving state), heartbeat then complete it, or abandon it (the short
lock expires and the message must come back, recovered, with the next
attempt); a few abandoning workers come back late and try to complete with
their stale token. A sampler watches the limits while everything runs.

At the end (producers stopped, everything drained) the logs must show:

* every created message completed exactly once, by the delivery with the
  latest token; nothing left in ``lonnymq.message``;
* per message, attempts 1, 2, ... each delivered once; ``is_recovered`` exactly
  when the previous attempt was not deferred; the content and the saved state
  as created / deferred;
* nothing delivered before its ``dequeue_at`` (the requested one, a deferral's
  target, an expired lock's expiry), read from the server's clock at delivery;
  in a channel with a release interval, the end of the interval when that is
  later (the message's ``dequeue_at`` from its admission on);
* ``max_concurrency`` never exceeded (sampled: live locks and all locks),
  ``max_size`` never exceeded (sampled), drops (NULL ids) only on channels
  with ``max_size``;
* consecutive deliveries of a rate-limited channel at least
  ``release_interval_ms`` apart (server clock readings of the dequeue calls);
* every ``false`` from complete / defer / heartbeat explained by a later
  delivery of that message (its lock had expired and was taken over).

Any error raised by a consumer's call (none is expected: dequeue never waits
for another transaction, see doc/message_dequeue.md) is recorded, the consumer
carries on, and the test fails at the end with the first error.

The default test (CI) stores 50,000 messages (LONNYMQ_SOAK_CI_MESSAGES), plus
the drops. The long one runs only with LONNYMQ_SOAK=1 (``make soak``):
LONNYMQ_SOAK_MESSAGES messages (default 500,000), or, with
LONNYMQ_SOAK_SECONDS, as many as producers create in that many seconds.
LONNYMQ_SOAK_SEED replays a run's random choices (not its timing).

The server time of each delivery is exact: a small wrapper function (created
in the test database, not part of the extension) reads each delivered
message's new ``dequeue_at`` (its lock expiry = the call's clock reading +
``p_lock_ms``) right after ``message_dequeue`` in the same transaction.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import threading
import time
import uuid

import psycopg
import pytest

from conftest import collect_refused
from lonnymq_dev.invariants import below_the_marks
from lonnymq_dev.threads import guarded

PRODUCERS = 4
CONSUMERS = 8
LOCK_MS = (200, 500)          # random per dequeue call
MAX_OUTSTANDING = 2500        # producers pause while this many messages are created but not completed
SAMPLE_EVERY_S = 0.02
CI_MESSAGES = int(os.environ.get("LONNYMQ_SOAK_CI_MESSAGES", "50000"))
DRAIN_TIMEOUT_S = 90


@dataclasses.dataclass(frozen=True)
class Channel:
    name: str
    max_concurrency: int | None = None
    max_size: int | None = None
    release_interval_ms: int = 0
    weight: float = 1.0
    # producers stop choosing the channel while this many of its messages are
    # outstanding (channels that drain slowly must not build an endless backlog)
    soft_cap: int | None = None


CHANNELS = [
    *(Channel(f"free_{i}", weight=6.0) for i in range(8)),
    Channel("conc_1a", max_concurrency=1, weight=1.5, soft_cap=60),
    Channel("conc_1b", max_concurrency=1, weight=1.5, soft_cap=60),
    Channel("conc_2", max_concurrency=2, weight=3.0, soft_cap=150),
    Channel("conc_3", max_concurrency=3, weight=3.0, soft_cap=200),
    Channel("size_5", max_size=5, weight=2.0),
    Channel("size_20", max_size=20, weight=3.0),
    Channel("size_60", max_size=60, weight=3.0),
    Channel("rate_20", release_interval_ms=20, weight=0.6, soft_cap=25),
    Channel("rate_35", release_interval_ms=35, weight=0.5, soft_cap=20),
    Channel("rate_50", release_interval_ms=50, weight=0.4, soft_cap=15),
    Channel("conc_2_size_15", max_concurrency=2, max_size=15, weight=2.0),
    Channel("conc_1_rate_30", max_concurrency=1, release_interval_ms=30, weight=0.4, soft_cap=15),
    Channel("size_8_rate_25", max_size=8, release_interval_ms=25, weight=1.0),
    Channel("conc_3_size_30_rate_20", max_concurrency=3, max_size=30, release_interval_ms=20, weight=1.0),
]
BY_NAME = {c.name: c for c in CHANNELS}

# A test helper in the test database (not part of lonnymq):
# message_complete_dequeue (message_dequeue when there is nothing to
# complete), plus each delivered message's new lock expiry, read in the same
# transaction once the dequeue has run. lock_until - p_lock_ms is the call's
# clock reading.
WRAPPER_SQL = """
CREATE FUNCTION public.soak_dequeue(
    p_ids bigint[], p_tokens integer[], p_lock_ms bigint, p_limit integer, p_channel text
)
RETURNS TABLE (
    id bigint, channel text, content text, state text, num_attempts integer,
    dequeue_at bigint, is_recovered boolean, locked_until bigint
)
LANGUAGE plpgsql
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT d.* FROM lonnymq.message_complete_dequeue(p_ids, p_tokens, p_lock_ms, p_limit, p_channel) AS d
    LOOP
        id := r.id;
        channel := r.channel;
        content := convert_from(r.content, 'UTF8');
        state := convert_from(r.state, 'UTF8');
        num_attempts := r.num_attempts;
        dequeue_at := r.dequeue_at;
        is_recovered := r.is_recovered;
        SELECT m.dequeue_at INTO locked_until FROM lonnymq.message AS m WHERE m.id = r.id;
        RETURN NEXT;
    END LOOP;
END;
$$;
"""

# held: the channel's messages, which max_size counts (not a schedule's
# pending occurrence, nor a wake, schedule '', which is no message).
SAMPLE_SQL = """
SELECT c.name,
       count(m.id) FILTER (WHERE m.is_locked AND m.dequeue_at > s.now_ms) AS live_locks,
       count(m.id) FILTER (WHERE m.is_locked) AS locks,
       count(m.id) FILTER (WHERE m.schedule IS NULL) AS held,
       count(m.id) FILTER (WHERE m.schedule = '') AS wakes
FROM (SELECT lonnymq.to_epoch(clock_timestamp()) AS now_ms) AS s
CROSS JOIN lonnymq.channel AS c
LEFT JOIN lonnymq.message AS m ON m.channel_id = c.id
WHERE c.name = ANY(%s)
GROUP BY c.name
"""


class CallFailed(Exception):
    """A consumer's call raised an error (recorded; the consumer goes on)."""


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclasses.dataclass
class Delivery:
    id: int
    channel: str
    attempt: int
    recovered: bool
    dequeue_at: int          # as returned: when it became deliverable
    at: int                  # server clock reading of the dequeue call
    locked_until: int
    state: str | None
    content: str


class Soak:
    def __init__(self, db, *, messages: int | None, seconds: float | None, seed: int):
        self.db = db
        self.target = messages
        self.seconds = seconds
        self.seed = seed
        self.lock = threading.Lock()
        self.stop_producing = threading.Event()
        self.stop_all = threading.Event()
        self.errors: list[str] = []
        # producer side
        self.created: dict[int, tuple[str, str, int]] = {}      # id -> (uuid, channel, requested dequeue_at)
        self.dropped: list[tuple[str, str]] = []                # (channel, uuid)
        self.num_reserved = 0
        self.producers_done = 0
        # consumer side
        self.deliveries: list[Delivery] = []
        self.completes: list[tuple[int, int, bool, str]] = []   # id, token, result, kind
        self.defers: list[tuple[int, int, bool, int | None, str | None]] = []  # id, token, result, target, state
        self.heartbeats: list[tuple[int, int, bool]] = []
        self.done_ids: set[int] = set()
        self.outstanding_by_channel: collections.Counter = collections.Counter()
        self.empty_dequeues = 0
        self.call_errors: list[tuple[str, str, str]] = []      # (call, sqlstate, message)
        self.dequeue_calls = 0
        # sampler
        self.samples = 0
        self.violations: list[str] = []
        self.max_seen: dict[str, tuple[int, int, int]] = {}

    # ----------------------------------------------------------- threads

    def _guard(self, fn, *args):
        guarded(fn, args, self.errors, self.lock, self.stop_producing, self.stop_all)

    def _pick_channel(self, rng: random.Random) -> Channel:
        with self.lock:
            usable = [c for c in CHANNELS
                      if c.soft_cap is None or self.outstanding_by_channel[c.name] < c.soft_cap]
        return rng.choices(usable, weights=[c.weight for c in usable])[0]

    def _reserve(self, want: int) -> int:
        """Reserve up to `want` of the messages still to create (0: done). Drops give their
        reservation back, so that `target` messages are stored in all."""
        with self.lock:
            if self.target is None:
                return want
            got = max(0, min(want, self.target - self.num_reserved))
            self.num_reserved += got
            return got

    def producer(self, n: int) -> None:
        rng = random.Random(self.seed * 1000 + n)
        conn = self.db.connect(autocommit=True)
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET lock_timeout = '30s'")
        while not self.stop_producing.is_set():
            with self.lock:
                outstanding = len(self.created) - len(self.done_ids)
            if outstanding > MAX_OUTSTANDING:
                time.sleep(0.005)
                continue
            mode = rng.random()
            size = self._reserve(1 if mode < 0.05 else rng.randint(10, 40))
            if size == 0:
                break
            batch = []
            for _ in range(size):
                ch = self._pick_channel(rng)
                r = rng.random()
                if r < 0.70:
                    at = None                                      # default: the transaction's start
                elif r < 0.85:
                    at = now_ms() + rng.randint(50, 600)           # scheduled
                elif r < 0.95:
                    at = now_ms() - rng.randint(1, 60_000)         # priority: in the past
                else:
                    at = rng.choice([0, -1, -rng.randint(1, 10**12)])  # priority: zero / negative
                u = str(uuid.uuid4())
                payload = json.dumps({"u": u, "p": n, "at": at})
                batch.append((ch.name, u, payload, at))
            # a consistent lock order on the quota rows of max_size channels
            # (two producers locking two of them in opposite orders would deadlock)
            batch.sort(key=lambda b: b[0])
            results: list[tuple[int | None, int]] = []
            if size > 1 and mode < 0.85:
                # one statement: message_create once per row, in array order
                with conn.transaction():
                    rows = conn.execute(
                        "SELECT x.o, lonnymq.message_create(x.c, convert_to(x.b, 'UTF8'), x.d),"
                        " lonnymq.to_epoch(now())"
                        " FROM unnest(%s::text[], %s::text[], %s::bigint[]) WITH ORDINALITY AS x (c, b, d, o)"
                        " ORDER BY x.o",
                        ([b[0] for b in batch], [b[2] for b in batch], [b[3] for b in batch]),
                    ).fetchall()
                results = [(r[1], r[2]) for r in rows]
            elif size > 1:
                # one call per message, one transaction
                with conn.transaction():
                    for b in batch:
                        results.append(conn.execute(
                            "SELECT lonnymq.message_create(%s, convert_to(%s, 'UTF8'), %s), lonnymq.to_epoch(now())",
                            (b[0], b[2], b[3])).fetchone())
            else:
                b = batch[0]
                results.append(conn.execute(
                    "SELECT lonnymq.message_create(%s, convert_to(%s, 'UTF8'), %s), lonnymq.to_epoch(now())",
                    (b[0], b[2], b[3])).fetchone())
            assert len(results) == len(batch)
            with self.lock:
                for (ch, u, _payload, at), (mid, tx_now) in zip(batch, results):
                    if mid is None:
                        self.dropped.append((ch, u))
                        self.num_reserved -= 1   # a drop does not count: the target is messages stored
                        continue
                    if mid in self.created:
                        self.errors.append(f"message_create returned id {mid} twice")
                    self.created[mid] = (u, ch, tx_now if at is None else at)
                    self.outstanding_by_channel[ch] += 1
        with self.lock:
            self.producers_done += 1

    def _call(self, conn, what: str, sql: str, params=()):
        """Run one consumer call in its own transaction. An error is not expected from any of
        them (they never wait for each other; see doc/): it is recorded and reported at the end,
        and the consumer carries on (the call's transaction rolled back: nothing happened)."""
        try:
            return conn.execute(sql, params).fetchall()
        except psycopg.DatabaseError as exc:
            if conn.broken:
                raise
            with self.lock:
                self.call_errors.append((what, exc.sqlstate or "", str(exc).replace("\n", " | ")[:600]))
            raise CallFailed(what) from exc

    def consumer(self, n: int) -> None:
        rng = random.Random(self.seed * 1000 + 100 + n)
        conn = self.db.connect(autocommit=True)
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET lock_timeout = '30s'")
        zombies: list[tuple[float, int, int, str]] = []   # (due monotonic, id, token, channel)
        names = [c.name for c in CHANNELS]
        # Even consumers run the worker loop: a finished message is completed
        # by their next call (message_complete_dequeue); each refused one is a
        # NOTICE, whose detail names it.
        pending: list[Delivery] | None = [] if n % 2 == 0 else None
        refused = collect_refused(conn)
        while not self.stop_all.is_set():
            try:
                self._consume_once(n, rng, conn, zombies, names, pending, refused)
            except CallFailed:
                continue

    def _consume_once(self, n, rng, conn, zombies, names, pending, refused) -> None:
        # workers that abandoned a message come back late with their stale token
        if zombies and zombies[0][0] <= time.monotonic():
            _, mid, token, ch = zombies.pop(0)
            ok = self._call(conn, "complete", "SELECT lonnymq.message_complete(%s, %s)", (mid, token))[0][0]
            self._completed(mid, token, ok, "late", ch)
            return
        limit = rng.choice((1, 1, 1, 2, 3, 5, 8))
        only = rng.choice(names) if rng.random() < 0.25 else None
        lock_ms = rng.randint(*LOCK_MS)
        done = list(pending or ())
        refused.clear()
        rows = self._call(conn, "dequeue", "SELECT * FROM public.soak_dequeue(%s, %s, %s, %s, %s)",
                          ([d.id for d in done] if done else None, [d.attempt for d in done] if done else None,
                           lock_ms, limit, only))
        if pending:
            pending.clear()
            for d in done:
                self._completed(d.id, d.attempt, d.id not in refused, "complete_dequeue", d.channel)
        with self.lock:
            self.dequeue_calls += 1
            if not rows:
                self.empty_dequeues += 1
        if not rows:
            time.sleep(0.002 if not self.stop_producing.is_set() else 0.01)
            return
        batch = []
        for (mid, ch, content, state, attempt, dq, rec, until) in rows:
            batch.append(Delivery(mid, ch, attempt, rec, dq, until - lock_ms, until, state,
                                  json.loads(content)["u"]))
        with self.lock:
            self.deliveries.extend(batch)
        for d in batch:
            r = rng.random()
            if r < 0.80 and pending is not None:
                pending.append(d)
            elif r < 0.80:
                ok = self._call(conn, "complete", "SELECT lonnymq.message_complete(%s, %s)",
                                (d.id, d.attempt))[0][0]
                self._completed(d.id, d.attempt, ok, "complete", d.channel)
            elif r < 0.89:
                k = rng.random()
                if k < 0.5:
                    target = now_ms() + rng.randint(0, 250)
                elif k < 0.75:
                    target = None
                else:
                    target = rng.choice((0, -5, now_ms() - rng.randint(1, 5000)))
                state = json.dumps({"by": n, "attempt": d.attempt}) if rng.random() < 0.5 else None
                ok = self._call(conn, "defer", "SELECT lonnymq.message_defer(%s, %s, %s, convert_to(%s, 'UTF8'))",
                                (d.id, d.attempt, target, state))[0][0]
                with self.lock:
                    self.defers.append((d.id, d.attempt, ok, target, state))
            elif r < 0.97:
                ok = self._call(conn, "heartbeat", "SELECT lonnymq.message_heartbeat(%s, %s, %s)",
                                (d.id, d.attempt, rng.randint(*LOCK_MS)))[0][0]
                with self.lock:
                    self.heartbeats.append((d.id, d.attempt, ok))
                ok = self._call(conn, "complete", "SELECT lonnymq.message_complete(%s, %s)",
                                (d.id, d.attempt))[0][0]
                self._completed(d.id, d.attempt, ok, "heartbeat+complete", d.channel)
            else:
                # abandon: never completed by this delivery (the lock expires)...
                if rng.random() < 0.3:
                    # ... except by a zombie that wakes up around the expiry
                    due = time.monotonic() + (d.locked_until - d.at + rng.randint(-50, 300)) / 1000
                    zombies.append((due, d.id, d.attempt, d.channel))
                    zombies.sort()

    def _completed(self, mid: int, token: int, ok: bool, kind: str, channel: str) -> None:
        with self.lock:
            self.completes.append((mid, token, ok, kind))
            if ok:
                if mid in self.done_ids:
                    self.errors.append(f"message {mid} completed twice (token {token})")
                self.done_ids.add(mid)
                self.outstanding_by_channel[channel] -= 1

    def sampler(self) -> None:
        conn = self.db.connect(autocommit=True)
        watched = [c.name for c in CHANNELS if c.max_concurrency or c.max_size]
        while not self.stop_all.is_set():
            rows = conn.execute(SAMPLE_SQL, (watched,)).fetchall()
            self.samples += 1
            for name, live, locks, held, wakes in rows:
                c = BY_NAME[name]
                prev = self.max_seen.get(name, (0, 0, 0))
                self.max_seen[name] = (max(prev[0], live), max(prev[1], locks), max(prev[2], held))
                if c.max_concurrency is not None and live > c.max_concurrency:
                    self.violations.append(f"{name}: {live} unexpired locks > max_concurrency {c.max_concurrency}")
                if c.max_concurrency is not None and locks > c.max_concurrency:
                    self.violations.append(f"{name}: {locks} locked messages > max_concurrency {c.max_concurrency}")
                if c.max_size is not None and held > c.max_size:
                    self.violations.append(f"{name}: {held} messages held > max_size {c.max_size}")
                # (A wake, no message: at most one per channel, _channel_admit.)
                if wakes > 1:
                    self.violations.append(f"{name}: {wakes} wakes")
            time.sleep(SAMPLE_EVERY_S)

    # ----------------------------------------------------------- run

    def run(self) -> dict:
        setup = self.db.connect(autocommit=True)
        setup.execute(WRAPPER_SQL)
        for c in CHANNELS:
            setup.execute("SELECT lonnymq.channel_set(%s, %s, %s, %s)",
                          (c.name, c.max_concurrency, c.max_size, c.release_interval_ms))
        threads = [threading.Thread(target=self._guard, args=(self.producer, i), name=f"producer-{i}")
                   for i in range(PRODUCERS)]
        threads += [threading.Thread(target=self._guard, args=(self.consumer, i), name=f"consumer-{i}")
                    for i in range(CONSUMERS)]
        sampler = threading.Thread(target=self._guard, args=(self.sampler,), name="sampler")
        began = time.monotonic()
        for t in threads:
            t.start()
        sampler.start()
        drain_began = None
        while True:
            time.sleep(0.05)
            if self.seconds is not None and time.monotonic() - began >= self.seconds:
                self.stop_producing.set()
            with self.lock:
                producing = self.producers_done < PRODUCERS
                finished = not producing and len(self.done_ids) >= len(self.created)
            if self.stop_all.is_set() or finished:
                break
            if not producing and drain_began is None:
                drain_began = time.monotonic()
                ready, due, ids = below_the_marks(setup)
                if ready or due:
                    with self.lock:
                        self.errors.append(f"when production ended, {ready} ready and {due} due message(s) "
                                           f"below the marks: {ids[:20]}")
            if drain_began is not None and time.monotonic() - drain_began > DRAIN_TIMEOUT_S:
                with self.lock:
                    self.errors.append(
                        f"drain timed out after {DRAIN_TIMEOUT_S}s: "
                        f"{len(self.created) - len(self.done_ids)} messages never completed")
                break
        elapsed = time.monotonic() - began
        self.stop_producing.set()
        self.stop_all.set()
        for t in threads + [sampler]:
            t.join(60)
        left = setup.execute(
            "SELECT m.id, m.channel, m.dequeue_at, m.is_locked, m.num_attempts,"
            " lonnymq.to_epoch(clock_timestamp()), m.position, m.is_held, m.is_admitted, m.created_at,"
            " (SELECT last_value FROM lonnymq.position_mark_seq), (SELECT last_value FROM lonnymq.due_mark_seq)"
            " FROM lonnymq.message AS m"
            " ORDER BY m.id LIMIT 20").fetchall()
        num_left = setup.execute("SELECT count(*) FROM lonnymq.message").fetchone()[0]
        channels = setup.execute(
            "SELECT name, num_admitted, num_pending, release_at, max_concurrency FROM lonnymq.channel ORDER BY name"
        ).fetchall()
        return {"elapsed": elapsed, "drain": (time.monotonic() - drain_began) if drain_began else 0.0,
                "left": left, "num_left": num_left, "channels": channels}

    # ----------------------------------------------------------- checks

    def check(self, result: dict) -> list[str]:
        problems: list[str] = list(self.errors)
        if self.call_errors:
            kinds = collections.Counter((what, state) for what, state, _m in self.call_errors)
            problems.append(f"{len(self.call_errors)} consumer calls raised an error {dict(kinds)}, "
                            f"first: {self.call_errors[0]}")
        if result["num_left"]:
            problems.append(f"{result['num_left']} messages left in lonnymq.message, e.g. {result['left']}"
                            f"; channels: {result['channels']}")
        problems += sorted(set(self.violations))[:20]

        for ch, _u in self.dropped:
            if BY_NAME[ch].max_size is None:
                problems.append(f"a message of {ch} (no max_size) was dropped")

        by_id: dict[int, list[Delivery]] = collections.defaultdict(list)
        for d in self.deliveries:
            by_id[d.id].append(d)
        oks: dict[int, list[tuple[int, str]]] = collections.defaultdict(list)
        for mid, token, ok, kind in self.completes:
            if ok:
                oks[mid].append((token, kind))
        defer_at: dict[tuple[int, int], tuple[int | None, str | None]] = {}
        for mid, token, ok, target, state in self.defers:
            if ok:
                defer_at[(mid, token)] = (target, state)
        heartbeat_ok = {(mid, token) for mid, token, ok in self.heartbeats if ok}

        for mid in oks:
            if mid not in self.created:
                problems.append(f"completed message {mid} was never created")
        for mid, (u, ch, requested) in self.created.items():
            ds = sorted(by_id.get(mid, []), key=lambda d: d.attempt)
            if not ds:
                problems.append(f"message {mid} ({ch}) was never delivered")
                continue
            attempts = [d.attempt for d in ds]
            if attempts != list(range(1, len(ds) + 1)):
                problems.append(f"message {mid} ({ch}): attempts delivered {attempts}")
            if len(oks.get(mid, [])) != 1:
                problems.append(f"message {mid} ({ch}): {len(oks.get(mid, []))} successful completions "
                                f"{oks.get(mid)}")
            elif oks[mid][0][0] != ds[-1].attempt:
                problems.append(f"message {mid} ({ch}): completed with token {oks[mid][0]} but attempt "
                                f"{ds[-1].attempt} was delivered")
            state = None
            prev = None
            for d in ds:
                if d.channel != ch or d.content != u:
                    problems.append(f"message {mid}: delivered as {d.channel}/{d.content}, created as {ch}/{u}")
                if d.at < d.dequeue_at:
                    problems.append(f"message {mid} ({ch}) attempt {d.attempt}: delivered at {d.at}, "
                                    f"before its dequeue_at {d.dequeue_at}")
                # A channel with a release interval admits a message with
                # the time its interval ends as its dequeue_at, when that is
                # later (doc/message_dequeue.md, "Admission").
                released = BY_NAME[ch].release_interval_ms > 0
                if prev is None:
                    if (d.dequeue_at < requested if released else d.dequeue_at != requested) or d.recovered:
                        problems.append(f"message {mid} ({ch}) first delivery: dequeue_at {d.dequeue_at} "
                                        f"(requested {requested}), recovered {d.recovered}")
                    if d.at < requested:
                        problems.append(f"message {mid} ({ch}) delivered at {d.at}, before the requested "
                                        f"{requested}")
                else:
                    deferred = defer_at.get((mid, prev.attempt))
                    if deferred is not None:
                        target, new_state = deferred
                        if d.recovered or (target is not None and (
                                d.dequeue_at < target if released else d.dequeue_at != target)):
                            problems.append(f"message {mid} ({ch}) attempt {d.attempt} after a defer to {target}: "
                                            f"dequeue_at {d.dequeue_at}, recovered {d.recovered}")
                        if new_state is not None:
                            state = new_state
                    else:
                        hb = (mid, prev.attempt) in heartbeat_ok
                        if not d.recovered or d.dequeue_at < prev.locked_until or (
                                not hb and not released and d.dequeue_at != prev.locked_until):
                            problems.append(
                                f"message {mid} ({ch}) attempt {d.attempt} after attempt {prev.attempt} "
                                f"locked until {prev.locked_until} (heartbeat: {hb}): dequeue_at "
                                f"{d.dequeue_at}, recovered {d.recovered}, at {d.at}")
                if d.state != state:
                    problems.append(f"message {mid} ({ch}) attempt {d.attempt}: state {d.state!r}, "
                                    f"expected {state!r}")
                prev = d

        # every refusal must be explained by a later delivery (the lock was taken over)
        latest = {mid: max(d.attempt for d in ds) for mid, ds in by_id.items()}
        refusals = [(mid, token, kind) for mid, token, ok, kind in self.completes if not ok]
        refusals += [(mid, token, "defer") for mid, token, ok, _t, _s in self.defers if not ok]
        refusals += [(mid, token, "heartbeat") for mid, token, ok in self.heartbeats if not ok]
        for mid, token, kind in refusals:
            if latest.get(mid, 0) <= token:
                problems.append(f"{kind} of message {mid} with its current token {token} returned false")

        # release intervals, measured between the server's clock readings
        for c in CHANNELS:
            if not c.release_interval_ms:
                continue
            times = sorted(d.at for d in self.deliveries if d.channel == c.name)
            gaps = [b - a for a, b in zip(times, times[1:])]
            bad = [g for g in gaps if g < c.release_interval_ms]
            if bad:
                problems.append(f"{c.name}: {len(bad)} of {len(gaps)} gaps between deliveries below "
                                f"{c.release_interval_ms} ms, e.g. {bad[:10]}")
        return problems

    def figures(self, result: dict) -> str:
        created = len(self.created)
        completed = len(self.done_ids)
        recovered = sum(d.recovered for d in self.deliveries)
        defers = sum(1 for x in self.defers if x[2])
        late_ok = sum(1 for x in self.completes if x[3] == "late" and x[2])
        late = sum(1 for x in self.completes if x[3] == "late")
        elapsed = result["elapsed"]
        per_channel = collections.Counter(d.channel for d in self.deliveries)
        drops = collections.Counter(ch for ch, _ in self.dropped)
        lines = [
            f"soak: {PRODUCERS} producers, {CONSUMERS} consumers, {len(CHANNELS)} channels, seed {self.seed}",
            f"  created {created}, dropped {len(self.dropped)} ({dict(drops)}), completed {completed}",
            f"  deliveries {len(self.deliveries)} in {self.dequeue_calls} dequeue calls "
            f"({self.empty_dequeues} empty), recoveries {recovered}, defers {defers}, "
            f"heartbeats {len(self.heartbeats)}, late completes by stale workers {late} ({late_ok} accepted), "
            f"calls that raised an error {len(self.call_errors)}",
            f"  elapsed {elapsed:.1f} s (drain {result['drain']:.1f} s): {created / elapsed:.0f} messages/s created, "
            f"{completed / elapsed:.0f}/s completed, {len(self.deliveries) / elapsed:.0f} deliveries/s",
            f"  limit samples {self.samples}; max seen (live locks, locks, held): "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.max_seen.items())),
            "  deliveries per channel: " + ", ".join(f"{k} {v}" for k, v in sorted(per_channel.items())),
        ]
        return "\n".join(lines)


def _run(db, *, messages=None, seconds=None):
    seed = int(os.environ.get("LONNYMQ_SOAK_SEED", random.randrange(1 << 30)))
    soak = Soak(db, messages=messages, seconds=seconds, seed=seed)
    result = soak.run()
    report = soak.figures(result)
    print("\n" + report)
    problems = soak.check(result)
    assert not problems, f"{len(problems)} problems (seed {seed}):\n" + "\n".join(problems[:40]) + "\n" + report
    if messages is not None:
        assert len(soak.created) == messages
    assert soak.dropped, "no message was ever dropped: the max_size channels were not exercised"
    assert sum(d.recovered for d in soak.deliveries) > 0, "no abandoned message was ever recovered"
    by_worker = [c for c in soak.completes if c[3] == "complete_dequeue"]
    assert any(c[2] for c in by_worker), "the worker loop (message_complete_dequeue) completed nothing"
    return soak


def test_soak(db):
    """CI size: 50,000 messages through the full mix."""
    _run(db, messages=CI_MESSAGES)


@pytest.mark.soak
@pytest.mark.skipif(os.environ.get("LONNYMQ_SOAK") != "1", reason="long soak: set LONNYMQ_SOAK=1 (make soak)")
def test_soak_long(db):
    """The long version: LONNYMQ_SOAK_SECONDS of production, or LONNYMQ_SOAK_MESSAGES messages
    (default 500,000)."""
    seconds = os.environ.get("LONNYMQ_SOAK_SECONDS")
    if seconds:
        _run(db, seconds=float(seconds))
    else:
        _run(db, messages=int(os.environ.get("LONNYMQ_SOAK_MESSAGES", "500000")))
