"""The benchmark report: markdown tables, the targets, PNG plots."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

REFERENCE = "baseline_amo"  # the at-most-once baseline every ratio refers to
# The held-snapshot targets (the issue; bench/held.py): at the end of the hold a
# dequeue reads at most 3 × the buffers it read before, and msg/s over the last
# 30 s of the hold is at least 0.7 × that of the 30 s before.
HELD_BUFFERS_MAX = 3.0
HELD_RATE_MIN = 0.7


# --------------------------------------------------------------------- formatting

def fmt_ms(v) -> str:
    if v is None:
        return "–"
    if v >= 1000:
        return f"{v / 1000:.1f} s"
    if v >= 100:
        return f"{v:.0f} ms"
    if v >= 10:
        return f"{v:.1f} ms"
    return f"{v:.2f} ms"


def fmt_bytes(v) -> str:
    if v is None:
        return "–"
    for unit in ("B", "kB", "MB", "GB"):
        if v < 1024 or unit == "GB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return str(v)


def fmt_ratio(v) -> str:
    return "–" if v is None else f"{v:.2f}"


def fmt_rate(v) -> str:
    if v is None:
        return "–"
    return f"{v:,.0f}" if v >= 10 else f"{v:.2g}"


def fmt_int(v) -> str:
    return "–" if v is None else f"{v:,}"


# --------------------------------------------------------------------- lookups

def run_of(data: dict, key: str, clients: int) -> dict | None:
    for r in data["runs"]:
        if r["variant"] == key and r["clients"] == clients:
            return r
    return None


def reference_mean(data: dict, clients: int, value) -> float | None:
    """A figure of the at-most-once baseline at this client count: the mean of
    value(run) over its run at the start and its run at the end (drift check),
    whichever exist and have it (value returns None or 0 when a run has not)."""
    vals = [v for k in (REFERENCE, REFERENCE + "_end")
            if (r := run_of(data, k, clients)) and (v := value(r))]
    return sum(vals) / len(vals) if vals else None


def reference_rate(data: dict, clients: int) -> float | None:
    """The at-most-once baseline's msg/s at this client count (reference_mean)."""
    return reference_mean(data, clients, lambda r: r["msgs_per_s"] if r["msgs_per_s"] > 0 else None)


def server_ms(run: dict, kind: str) -> float | None:
    s = run.get("server_calls", {}).get(kind)
    if s:
        return s["mean_ms"]
    c = run.get("client_calls", {}).get(kind)
    return c["mean_ms"] if c else None


def consume_cost(run: dict | None) -> float | None:
    """Dequeue + complete, mean server time per call (pg_stat_statements; client
    round trip when it is not available)."""
    if not run:
        return None
    d, c = server_ms(run, "dequeue"), server_ms(run, "complete")
    if d is None:
        return None
    return d + (c or 0.0)


def of_version(data: dict, version: str | None) -> dict:
    """data with only this version's lonnymq runs (and every baseline's); data itself
    for None. With BENCH_VERSIONS the targets and plots read the last version's."""
    if version is None:
        return data
    keep = (None, version)
    out = {**data, "runs": [r for r in data["runs"] if r.get("version") in keep]}
    if data.get("held"):
        out["held"] = {**data["held"], "runs": [h for h in data["held"]["runs"] if h.get("version") in keep]}
    return out


def last_version(data: dict) -> str | None:
    return (data["env"].get("versions") or [None])[-1]


def label(run: dict) -> str:
    """A run's title, with its version when BENCH_VERSIONS compares several."""
    return run["title"] + (f" [{run['version']}]" if run.get("version") else "")


def target_clients(data: dict) -> int:
    clients = data["env"]["clients"]
    return 8 if 8 in clients else max(clients)


# --------------------------------------------------------------------- targets

def targets(data: dict) -> list[dict]:
    data = of_version(data, last_version(data))
    n = target_clients(data)
    out = []

    def add(name, measured, required, ok, detail=""):
        status = "n/a" if ok is None else ("PASS" if ok else "MISS")
        out.append({"name": name, "measured": measured, "required": required, "status": status, "detail": detail})

    def rate(key):
        r = run_of(data, key, n)
        return r["msgs_per_s"] if r else None

    rounds = data.get("rounds") or {}
    per_round = rounds.get("msgs_per_s", {}) if rounds.get("clients") == n else {}

    def ratio(key, ref_key, ref_rate, required, ok, name):
        """The run's ratio; with interleaved rounds, judged on the median of the
        run's ratio and each round's."""
        x = rate(key)
        r = x / ref_rate if x and ref_rate else None
        text = _ratio_text(r, x, ref_rate)
        xs, refs = per_round.get(key) or [], per_round.get(ref_key) or []
        if r is not None and xs and len(xs) == len(refs):
            all_r = [r] + [a / b for a, b in zip(xs, refs) if a and b]
            med = statistics.median(all_r)
            text = (f"{med:.2f} × median of {len(all_r)} (this run {r:.2f} ×; rounds "
                    + ", ".join(f"{a / b:.2f}" for a, b in zip(xs, refs) if a and b) + ")")
            r = med
        add(name, text, required, None if r is None else ok(r))

    ref = reference_rate(data, n)
    one = rate("lifecycle_1ch")
    ratio("lifecycle_1ch", "baseline_amo", ref, "≥ 0.5 ×", lambda r: r >= 0.5,
          f"Lifecycle, one channel, {n} clients vs at-most-once baseline")
    for key, title in (("lifecycle_64ch", "64 channels, no limits"),
                       ("lifecycle_64ch_mc2", "64 channels, max_concurrency 2")):
        ratio(key, "lifecycle_1ch", one, "≥ 0.9 ×", lambda r: r >= 0.9,
              f"Lifecycle, {title}, {n} clients vs one channel")
    ratio("batch_100", "baseline_amo", ref, "≥ 5 ×", lambda r: r >= 5,
          f"Batched by 100, {n} clients vs at-most-once baseline (unbatched)")
    # The worker loop (0.10.0): create; message_complete_dequeue.
    worker = rate("worker_1ch")
    ratio("worker_1ch", "baseline_amo", ref, "≥ 0.65 ×", lambda r: r >= 0.65,
          f"Worker loop, one channel, {n} clients vs at-most-once baseline")
    ratio("worker_64ch", "worker_1ch", worker, "≥ 0.9 ×", lambda r: r >= 0.9,
          f"Worker loop, 64 channels, {n} clients vs one channel")
    ratio("worker_batch_100", "batch_100", rate("batch_100"), "≥ 1.1 ×", lambda r: r >= 1.1,
          f"Worker loop in batches of 100, {n} clients vs dequeue-then-complete batches of 100")
    # References, not targets: what three minimal PL/pgSQL calls reach, and
    # how far lonnymq's one channel is from them.
    ratio("baseline_floor", "baseline_amo", ref, "none: a reference", lambda r: None,
          f"Floor (three minimal PL/pgSQL calls), {n} clients vs at-most-once baseline")
    ratio("lifecycle_1ch", "baseline_floor", rate("baseline_floor"), "none: a reference", lambda r: None,
          f"Lifecycle, one channel, {n} clients vs the floor")
    ratio("baseline_floor_worker", "baseline_amo", ref, "none: a reference", lambda r: None,
          f"Floor worker loop (two minimal PL/pgSQL calls), {n} clients vs at-most-once baseline")
    ratio("worker_1ch", "baseline_floor_worker", rate("baseline_floor_worker"), "none: a reference",
          lambda r: None, f"Worker loop, one channel, {n} clients vs the floor worker loop")

    backlogs = sorted({r["backlog"] for r in data["runs"] if r["variant"].startswith("backlog_")
                       and not r["variant"].endswith("_future") and r["backlog"]})
    empty = consume_cost(run_of(data, "lifecycle_1ch", n))
    if len(backlogs) >= 2:
        lo, hi = backlogs[0], backlogs[-1]
        klo, khi = _backlog_key(data, lo), _backlog_key(data, hi)
        clo, chi = consume_cost(run_of(data, klo, n)), consume_cost(run_of(data, khi, n))
        r = chi / clo if chi and clo else None
        add(f"Backlog {hi:,} vs {lo:,}: dequeue + complete cost, {n} clients",
            _cost_text(r, chi, clo) + _one_client(data, khi, klo), "≤ 1.3 ×",
            None if r is None else r <= 1.3)
        # DESIGN.md: "dequeue cost flat (within noise) as the backlog grows by 100x":
        # every size, not only the two ends (a cost that peaks in between, or is
        # highest at the smallest size, is not flat either).
        costs = {b: consume_cost(run_of(data, _backlog_key(data, b), n)) for b in backlogs}
        if all(costs.values()):
            bmax = max(costs, key=costs.get)
            bmin = min(costs, key=costs.get)
            r = costs[bmax] / costs[bmin]
            add(f"Backlog flatness: highest / lowest cost over {', '.join(_human(b) for b in backlogs)}, "
                f"{n} clients", f"{r:.2f} × ({_human(bmax)}: {fmt_ms(costs[bmax])} / "
                f"{_human(bmin)}: {fmt_ms(costs[bmin])})", "≤ 1.3 ×", r <= 1.3)
    fut = next((r["variant"] for r in data["runs"] if r["variant"].endswith("_future")), None)
    for key, title in ((fut, "future-dated backlog"), ("saturated", "saturated channels")):
        if not key:
            continue
        run = run_of(data, key, n)
        c = consume_cost(run)
        r = c / empty if c and empty else None
        label = run["title"] if run else title
        add(f"{label}: cost vs empty queue (one channel), {n} clients",
            _cost_text(r, c, empty) + _one_client(data, key, "lifecycle_1ch"), "≤ 1.3 ×",
            None if r is None else r <= 1.3)
    # Held snapshot (bench/held.py): lonnymq's variants only; the plain table is
    # the reference shown beside them in the "Held snapshot" section.
    held = data.get("held") or {}
    for h in held.get("runs", []):
        if h.get("baseline"):
            continue
        who = f"Held snapshot, {h['title']}, {h['clients']} clients"
        r = h.get("buffers_ratio")
        add(f"{who}: buffers per dequeue, end of the hold vs before",
            "–" if r is None else f"{r:.2f} × ({h['buffers_end']:,} / {h['buffers_before']:,})",
            f"≤ {HELD_BUFFERS_MAX:g} ×", None if r is None else r <= HELD_BUFFERS_MAX)
        r = h.get("rate_ratio")
        add(f"{who}: msg/s, last {h.get('window_end_s') or 0:.0f} s of the hold vs "
            f"{h.get('window_before_s') or 0:.0f} s before",
            "–" if r is None else f"{r:.2f} × ({fmt_rate(h['rate_end'])} / {fmt_rate(h['rate_before'])} msg/s)",
            f"≥ {HELD_RATE_MIN:g} ×", None if r is None else r >= HELD_RATE_MIN)
    return out


def _backlog_key(data, n):
    for r in data["runs"]:
        if r["backlog"] == n and r["variant"].startswith("backlog_") and not r["variant"].endswith("_future"):
            return r["variant"]
    return None


def _ratio_text(r, a, b) -> str:
    if r is None:
        return "–"
    return f"{r:.2f} × ({a:,.0f} / {b:,.0f} msg/s)"


def _cost_text(r, a, b) -> str:
    if r is None:
        return "–"
    return f"{r:.2f} × ({fmt_ms(a)} / {fmt_ms(b)})"


def _one_client(data, key, ref_key) -> str:
    clients = data["env"]["clients"]
    if 1 not in clients or target_clients(data) == 1:
        return ""
    a, b = consume_cost(run_of(data, key, 1)), consume_cost(run_of(data, ref_key, 1))
    if not a or not b:
        return ""
    return f"; at 1 client {a / b:.2f} ×"


# --------------------------------------------------------------------- markdown

SCENARIO_NOTES = {
    "baseline": "A plain table `(id bigserial, created_us, payload)`; each client alternates an INSERT and a "
                "consume. At-most-once consumes with one `DELETE … WHERE id = (SELECT id … ORDER BY id FOR UPDATE "
                "SKIP LOCKED LIMIT 1) RETURNING`; at-least-once locks the row with the same SELECT, deletes it "
                "and commits, in one transaction. The at-most-once run is repeated at the end; ratios use the "
                "mean of both. The floor is not a queue to choose but a reference: three PL/pgSQL functions "
                "(`SECURITY DEFINER`, `SET search_path`) called as lonnymq's are (create; dequeue with a lock "
                "that expires; complete with the token), doing nothing else, on a table shaped like "
                "`lonnymq.message`: what the API's shape costs before any of lonnymq's features "
                "(bench/README.md).",
    "lifecycle": "Each client loops: `message_create` (autocommit), `message_dequeue(lock 60 s, limit 1)`, "
                 "`message_complete` of what it got. All in one unconstrained channel.",
    "channels": "As 1, but each client creates into the 64 channels in turn; dequeue takes from any channel. "
                "Without limits, and with `channel_set(…, p_max_concurrency => 2)` on every channel.",
    "batch": "Each client loops: `message_create_batch` of N messages, "
             "`message_dequeue(…, p_limit => N)`, and `message_complete_batch` of what it got: "
             "three statements, three transactions. "
             "Create / complete columns are per statement (N messages).",
    "backlog": "The lifecycle loop of 1, on top of a standing backlog: ready messages dated a minute ago "
               "(FIFO: the clients consume the backlog's head and append to its tail, so its size stays "
               "constant), or 1M messages dated a day ahead (900k in the clients' channel, 100k in 1,000 "
               "other channels) with only the clients' own messages ready. Fixtures are inserted directly "
               "into `lonnymq.message` after one `message_create` per channel, then VACUUM ANALYZE; the same "
               "backlog serves every client count (VACUUM between runs). On a ready backlog the clients first "
               "consume fixture messages (no latency sample); once they reach messages created by earlier "
               "runs, the latency is the backlog's age (its size / the rate), not the queue's overhead.",
    "saturated": "10,000 channels with `max_concurrency` 1, each with one message locked for a day and one "
                 "ready behind it (built with `channel_set`, direct inserts and `message_dequeue`), plus the "
                 "clients' unconstrained channel running the lifecycle loop of 1.",
}


def markdown(data: dict, plots: dict, args) -> str:
    env = data["env"]
    n = target_clients(data)
    L: list[str] = []
    L.append(f"# lonnymq benchmark — {args.name}\n")
    L.append(
        "Messages consumed per second by clients that each alternate creating and consuming, "
        "compared with plain-table baselines measured in the same run on the same server "
        "(absolute figures drift on shared machines; the ratios are what to compare). "
        f"Rerun: `make bench` (or `BENCH_DURATION={env['duration']:g} BENCH_CLIENTS="
        f"{','.join(map(str, env['clients']))} make bench`).\n"
    )
    L.append("## Environment\n")
    L.append("| | |\n|---|---|")
    s = env.get("settings", {})
    rows = [
        ("PostgreSQL", env["postgres"]),
        ("lonnymq", env.get("lonnymq")),
        ("server", env["where"]),
        ("settings", ", ".join(f"{k}={v}" for k, v in sorted(s.items()))),
        ("machine", f"{env['machine']}, {env['cores']} cores"),
        ("clients", f"one process and one connection each (Python {env['python']}, psycopg {env['psycopg']}), "
                    "autocommit, prepared statements"),
        ("per run", f"{env['warmup']:g} s warm-up, then {env['duration']:g} s measured"),
        ("client counts", ", ".join(map(str, env["clients"]))),
        ("started / finished", f"{env['started']} / {env.get('finished', '?')} "
                               f"({env.get('wall_min', 0):.1f} min)"),
        ("load average", f"{_load(env.get('load_start'))} at the start, {_load(env.get('load_end'))} at the end"),
        ("git", env.get("git")),
        ("lonnymq measured", _builds(data)),
    ]
    held = data.get("held") or {}
    if held.get("runs"):
        h = held["runs"][0]
        rows.append(("held snapshot (6)", f"{held['clients']} clients, one run per variant: {h['warmup_s']:g} s "
                                          f"warm-up, {h['before_s']:g} s before, {h['hold_s']:g} s held, "
                                          f"{held.get('tail_s', 5):g} s after"))
    for k, v in rows:
        L.append(f"| {k} | {v} |")
    L.append("")

    L.append(f"## Targets (at {n} clients)\n")
    L.append("| target | measured | required | result |\n|---|---|---|---|")
    for t in targets(data):
        L.append(f"| {t['name']} | {t['measured']} | {t['required']} | **{t['status']}** |")
    L.append("")
    L.append("Cost = mean server time of `message_dequeue` + `message_complete` per call "
             "(pg_stat_statements, top level); ratios of msg/s are against the at-most-once "
             "baseline at the same client count.\n")
    if last_version(data):
        L.append(f"With BENCH_VERSIONS the targets (and the rounds below) are {last_version(data)}'s runs "
                 "and the baselines'; every version's are in \"A/B by version\".\n")
    rounds = data.get("rounds") or {}
    if rounds.get("msgs_per_s"):
        k = len(next(iter(rounds["msgs_per_s"].values())))
        L.append(f"The throughput ratios are judged on the median of the run above and {k} more "
                 f"interleaved rounds at {rounds['clients']} clients (each round runs every variant "
                 "below once, one after the other), because one 10-second run on this shared machine "
                 "can be off by a third. msg/s per round:\n")
        L.append("| variant | " + " | ".join(f"round {i + 1}" for i in range(k)) + " |")
        L.append("|---|" + "---|" * k)
        for key, vals in rounds["msgs_per_s"].items():
            L.append(f"| {key} | " + " | ".join(f"{x:,.0f}" for x in vals) + " |")
        L.append("")

    L.extend(ab_section(data))
    L.extend(cpu_section(data, n))
    L.extend(sync_off_section(data))

    L.append("## Results\n")
    L.append("Columns: consumed messages/s in the measured window; × amo = ratio to the at-most-once "
             "baseline at the same client count; latency = create-to-dequeue (server clock at delivery − "
             "server clock at creation), p50 / p99; dequeue, complete, create = mean server time per "
             "call (pg_stat_statements); empty = dequeue calls that returned nothing; dead tuples and "
             "size (tables + indexes + TOAST) of the queue's tables right after the run.\n")
    groups = data.get("groups", {})
    for g, gtitle in groups.items():
        rs = [r for r in data["runs"] if r["group"] == g]
        if not rs:
            continue
        L.append(f"### {gtitle}\n")
        if g in SCENARIO_NOTES:
            L.append(SCENARIO_NOTES[g] + "\n")
        extra = " cost | vs empty |" if g in ("backlog", "saturated") else ""
        extra_sep = "---|---|" if extra else ""
        L.append(f"| variant | clients | msg/s | × amo | p50 | p99 | dequeue | complete | create | empty "
                 f"| errors | dead tuples | size |{extra}")
        L.append(f"|---|---|---|---|---|---|---|---|---|---|---|---|---|{extra_sep}")
        for r in rs:
            ref = reference_rate(data, r["clients"])
            ratio = r["msgs_per_s"] / ref if ref else None
            lat = r["latency"]
            row = (
                f"| {label(r)} | {r['clients']} | {r['msgs_per_s']:,.0f} | {fmt_ratio(ratio)} "
                f"| {fmt_ms(lat['p50_ms'])} | {fmt_ms(lat['p99_ms'])} "
                f"| {fmt_ms(server_ms(r, 'dequeue'))} | {fmt_ms(server_ms(r, 'complete'))} "
                f"| {fmt_ms(server_ms(r, 'create'))} | {r['empty']:,} | {r['errors']:,} "
                f"| {r['tables']['dead']:,} | {fmt_bytes(r['tables']['bytes'])} |"
            )
            if extra:
                c = consume_cost(r)
                e = consume_cost(run_of(of_version(data, r.get("version")), "lifecycle_1ch", r["clients"]))
                row += f" {fmt_ms(c)} | {fmt_ratio(c / e if c and e else None)} |"
            L.append(row)
        L.append("")
        errs = [f"{r['variant']} x{r['clients']}: {r['error_samples'][0]}" for r in rs if r.get("error_samples")]
        if errs:
            L.append("Errors seen: " + "; ".join(errs[:4]) + "\n")

    L.extend(held_section(data, plots))

    if any(k in plots for k in ("throughput", "latency", "backlog")):  # the held plot is in its section
        L.append("## Plots\n")
        for key, title in (("throughput", "Throughput against clients"),
                           ("latency", f"Create-to-dequeue latency, {n} clients"),
                           ("backlog", "Consume cost against backlog")):
            if key in plots:
                L.append(f"**{title}**\n\n![{title}]({Path(plots[key]).name})\n")

    prof = data.get("profile") or {}
    if prof.get("runs"):
        L.append("## Profile (summary)\n")
        L.append(f"Profiling pass at {prof['clients']} clients with `pg_stat_statements.track = all`, "
                 "`track_functions = pl` and pg_stat_activity sampled every 10 ms (its throughput is lower "
                 f"than above: the tracking costs). Full detail and EXPLAIN (ANALYZE, BUFFERS) of every "
                 f"nested statement: [{args.name}-profile.md]({args.name}-profile.md).\n")
        for pr in prof["runs"]:
            L.append(f"**{pr['title']}** ({pr['msgs_per_s']:,.0f} msg/s under profiling, "
                     f"{pr['empty']:,} empty dequeues). Where the backends were: "
                     + ", ".join(f"{w['type']}/{w['event']} {100 * w['share']:.0f}%" for w in pr["waits"][:6])
                     + ".\n")
            fns = [f for f in pr.get("functions", []) if not f["function"].endswith("to_epoch")][:6]
            if fns:
                L.append("Function self time per call: " + ", ".join(
                    f"`{f['function'].split('.')[-1]}` {f['self_mean_ms']:.3f} ms × {f['calls']:,}" for f in fns)
                    + ".\n")
    return "\n".join(L) + "\n"


def held_section(data: dict, plots: dict) -> list[str]:
    """Scenario 6: msg/s and buffers per dequeue before and at the end of a held
    snapshot, per variant, and the per-second plot."""
    held = data.get("held") or {}
    hs = held.get("runs") or []
    if not hs:
        return []
    h0 = hs[0]
    # the windows are RATE_WINDOW_S, or the whole phase when it is shorter
    wb = min(held.get("window_s", 30), h0["before_s"])
    we = min(held.get("window_s", 30), h0["hold_s"])
    sql = held.get("snapshot_sql", [])
    # over a standing backlog (held_*), or near empty (held_empty_*: backlog 0)
    backlogs = sorted({h.get("backlog") or 0 for h in hs}, reverse=True)
    queues = [f"over a standing backlog of {b:,} ready messages (FIFO; each client creates one "
              "message per message it consumes, so the backlog stays)" if b else
              "near empty, with consumers keeping up (no backlog: each client creates its message, "
              "or batch, then takes one, or a batch)" for b in backlogs]
    which = "; each variant's title says which" if len(queues) > 1 else ""
    L = ["## Held snapshot\n",
         f"{held['clients']} clients churn a queue " + "; or ".join(queues) + which + ". "
         f"After {h0['warmup_s']:g} s of warm-up and {h0['before_s']:g} s of normal "
         "running, another connection runs `BEGIN ISOLATION LEVEL REPEATABLE READ`, "
         + ", ".join(f"`{q}`" for q in sql)
         + " (a snapshot, and an xid, so that it holds the xmin horizon back as a writing "
         f"transaction would), holds it {h0['hold_s']:g} s and commits; the clients run "
         f"{held.get('tail_s', 5):g} s more (the plot's tail). msg/s: messages "
         f"consumed in the {wb:g} s before the snapshot and in the last {we:g} s of the hold "
         "(the clients' counters, read every second). Buffers per dequeue: shared hit + read "
         "of the top plan node of `EXPLAIN (ANALYZE, BUFFERS)` of one dequeue as the clients "
         "call it (`message_dequeue(30000, N)`, or the plain table's `DELETE … SKIP LOCKED`), "
         "run by a probe connection in a transaction it rolls back, just before the snapshot "
         f"and at the end of the hold (and every {held.get('probe_every_s', 10):g} s: JSON). "
         "For lonnymq the top node is the Function Scan, whose buffers include every statement "
         f"the function runs. Targets: buffers ≤ {HELD_BUFFERS_MAX:g} ×, msg/s ≥ {HELD_RATE_MIN:g} × "
         "(lonnymq; the plain table is the reference).\n",
         f"| variant | msg/s before ({wb:g} s) | msg/s last {we:g} s of hold | × | buffers/dequeue "
         "before | at end | × | probe ms before / end | dead tuples at end | holder's xmin age | "
         "errors |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for h in hs:
        ms = {p["phase"]: p["ms"] for p in h.get("probes", [])}
        dead = (h.get("tables_end") or {}).get("dead")
        L.append(f"| {label(h)} ({h['variant']}) | {fmt_rate(h['rate_before'])} | {fmt_rate(h['rate_end'])} "
                 f"| {fmt_ratio(h['rate_ratio'])} | {fmt_int(h['buffers_before'])} "
                 f"| {fmt_int(h['buffers_end'])} | {fmt_ratio(h['buffers_ratio'])} "
                 f"| {fmt_ms(ms.get('just before'))} / {fmt_ms(ms.get('end'))} | {fmt_int(dead)} "
                 f"| {fmt_int((h.get('holder') or {}).get('xmin_age_at_end'))} | {h['errors']:,} |")
    L.append("")
    errs = [f"{h['variant']}: {h['timeline_errors'][0]}" for h in hs if h.get("timeline_errors")]
    if errs:
        L.append("Timeline errors (the figures of these variants are incomplete): " + "; ".join(errs) + "\n")
    if plots.get("held"):
        L.append(f"![Held snapshot: msg/s per second]({Path(plots['held']).name})\n")
    return L


def ab_section(data: dict) -> list[str]:
    """BENCH_VERSIONS: per variant and client count, each version's median msg/s
    over its interleaved runs (the main run and the rounds') and the ratio of each
    later version to the first."""
    versions = data["env"].get("versions") or []
    if not versions:
        return []
    rounds = data.get("rounds") or {}
    per: dict = {}  # (variant, clients) -> version -> [runs]
    for r in data["runs"] + [{**x, "clients": rounds["clients"]} for x in rounds.get("runs", [])]:
        if r.get("version"):
            per.setdefault((r["variant"], r["clients"]), {}).setdefault(r["version"], []).append(r)
    first, rest = versions[0], versions[1:]
    n_rounds = max((x["round"] for x in rounds.get("runs", [])), default=0)
    L = ["## A/B by version\n",
         f"Every lonnymq run ran once per version ({', '.join(versions)}), one version right after "
         "the other, each from a fresh `CREATE EXTENSION lonnymq VERSION '…'`"
         + (f"; so did each of the {n_rounds} interleaved rounds at {rounds['clients']} clients" if n_rounds else "")
         + ". msg/s = the median over a version's runs (the main run's and the rounds'; the last column "
         "lists them in the order they ran). The targets and plots are the last version's.\n",
         "| variant | clients | runs | " + " | ".join(f"{v} msg/s" for v in versions) + " | "
         + " | ".join(f"{v} / {first}" for v in rest) + " | empty dequeues | errors | msg/s of each run |",
         "|---|---|---|" + "---|" * (len(versions) + len(rest)) + "---|---|---|"]
    for (key, n), rs in per.items():
        med = {v: statistics.median(x["msgs_per_s"] for x in rs[v]) if rs.get(v) else None for v in versions}

        def each(f):
            return " / ".join(f(rs.get(v, [])) for v in versions)

        L.append(f"| {key} | {n} | {each(lambda xs: str(len(xs)))} | "
                 + " | ".join(fmt_rate(med[v]) for v in versions) + " | "
                 + " | ".join(fmt_ratio(med[v] / med[first] if med[v] and med[first] else None) for v in rest)
                 + f" | {each(lambda xs: fmt_int(sum(x['empty'] for x in xs)))}"
                 f" | {each(lambda xs: fmt_int(sum(x['errors'] for x in xs)))} | "
                 + "; ".join(f"{v}: " + ", ".join(f"{x['msgs_per_s']:,.0f}" for x in rs.get(v, [])) for v in versions)
                 + " |")
    L.append("")
    errs = [f"{x['variant']}@{x['version']}: {x['error_samples'][0]}"
            for rs in per.values() for xs in rs.values() for x in xs if x.get("error_samples")]
    if errs:
        L.append("Errors seen: " + "; ".join(errs[:4]) + "\n")
    return L


def cpu_section(data: dict, n: int) -> list[str]:
    """Where the CPU goes at n clients: µs per consumed message, by the client
    processes, their backends and the rest of the machine."""
    rs = [r for r in data["runs"] if r["clients"] == n and (r.get("cpu_per_msg") or {}).get("total_us")]
    ref_total = reference_mean(data, n, lambda r: (r.get("cpu_per_msg") or {}).get("total_us"))
    return cpu_table(
        rs, ref_total, f"## Where the CPU goes ({n} clients, synchronous_commit {data['env']['settings'].get('synchronous_commit', '?')})\n",
        "CPU time per consumed message in the measured window, in µs: the client processes "
        "(getrusage), their server backends (/proc/PID/stat) and the rest of the machine (busy time "
        "from /proc/stat minus both: autovacuum, the WAL writer, the checkpointer, the benchmark's "
        "main process). The clients run on the server's machine, so when its cores are all busy "
        "msg/s is about cores ÷ total: a throughput ratio is the inverse ratio of the totals, and "
        "a target of 0.5 × the at-most-once baseline means a total of at most twice the baseline's. "
        "× amo = the total against the at-most-once baseline's (mean of its two runs).\n")


def sync_off_section(data: dict) -> list[str]:
    """The second pass: the target variants again with synchronous_commit off."""
    off = data.get("sync_off") or {}
    rs = [r for r in off.get("runs", []) if (r.get("cpu_per_msg") or {}).get("total_us")]
    amo = [r for r in rs if r["variant"] == "baseline_amo"]
    ref_total = amo[0]["cpu_per_msg"]["total_us"] if amo else None
    ref_rate = amo[0]["msgs_per_s"] if amo else None
    L = cpu_table(
        rs, ref_total, f"## synchronous_commit off (second pass, {off.get('clients')} clients)\n",
        "The variants the targets compare, run once more with `SET synchronous_commit = off` in every "
        "client session: commits no longer wait for the WAL flush, so what is left is CPU. Same "
        "columns as above; × amo = against this pass's at-most-once run.\n")
    if L and ref_rate:
        L.insert(-1, "msg/s against the at-most-once run of this pass: " + ", ".join(
            f"{label(r)} {fmt_ratio(r['msgs_per_s'] / ref_rate)}" for r in rs if r is not amo[0]) + ".\n")
    return L


def cpu_table(rs: list, ref_total, title: str, text: str) -> list[str]:
    if not rs:
        return []
    L = [title, text,
         "| variant | msg/s | client | backends | other | total | × amo total | cores busy |",
         "|---|---|---|---|---|---|---|---|"]

    def us(v):
        return "–" if v is None else f"{v:,.0f}"

    for r in rs:
        c = r["cpu_per_msg"]
        x = c["total_us"] / ref_total if ref_total else None
        busy = "–" if c["cores_busy"] is None else f"{c['cores_busy']:.2f}"
        L.append(f"| {label(r)} | {r['msgs_per_s']:,.0f} | {us(c['client_us'])} | {us(c['backend_us'])} "
                 f"| {us(c['other_us'])} | {us(c['total_us'])} | {fmt_ratio(x)} | {busy} |")
    L.append("")
    return L


def _builds(data: dict) -> str:
    env = data["env"]
    builds = env.get("builds") or []
    if not builds:
        return "–"
    by_version = env.get("builds_by_version")
    if by_version:
        changed = any(len(b) > 1 for b in by_version.values())
        return (("**WARNING: an installed version changed during the run**: " if changed else "function fingerprints: ")
                + "; ".join(f"{v} `{', '.join(b) or '–'}`" for v, b in by_version.items()))
    head = env.get("head_build")
    if len(builds) > 1:
        per = {}
        for r in data["runs"]:
            if r.get("build"):
                per.setdefault(r["build"], []).append(f"{r['variant']} x{r['clients']}")
        return ("**WARNING: the installed extension changed during the run** (someone ran make install): "
                + "; ".join(f"`{b}`{' (= HEAD)' if b == head else ''}: {', '.join(v[:3])}"
                            f"{' …' if len(v) > 3 else ''}" for b, v in per.items()))
    b = builds[0]
    if head is None:
        return f"function fingerprint `{b}`"
    return f"function fingerprint `{b}`, " + ("the committed HEAD" if b == head else
                                              "**not HEAD's: uncommitted changes to sql/src were measured**")


def _load(v) -> str:
    if not v:
        return "?"
    return " / ".join(f"{x:.2f}" for x in v)


def profile_markdown(data: dict) -> str:
    prof = data.get("profile") or {}
    L = [f"# lonnymq benchmark profile — {data['env']['started']}\n"]
    L.append(f"{prof.get('clients', '?')} clients, {data['env']['duration']:g} s per run, "
             "pg_stat_statements.track = all (nested statements of the PL/pgSQL functions appear as "
             "their own rows, toplevel = false), track_functions = pl, wait events sampled from "
             "pg_stat_activity every 10 ms (Client = the backend waits for the client program).\n")
    for pr in prof.get("runs", []):
        L.append(f"## {pr['title']}\n")
        L.append(f"{pr['msgs_per_s']:,.0f} msg/s under profiling; {pr['empty']:,} empty dequeues.\n")
        cc = pr.get("client_calls", {})
        if cc:
            L.append("Client round trips: " + ", ".join(
                f"{k} {fmt_ms(v['mean_ms'])} mean / {fmt_ms(v['p99_ms'])} p99" for k, v in cc.items()) + ".\n")
        L.append("### Wait events\n")
        L.append("| type | event | share |\n|---|---|---|")
        for w in pr["waits"][:15]:
            L.append(f"| {w['type']} | {w['event']} | {100 * w['share']:.1f}% |")
        L.append("")
        if pr.get("statements"):
            L.append("### Statements by total time (pg_stat_statements, track = all)\n")
            L.append("| top | calls | total ms | mean ms | rows/call | blks hit/call | blks dirtied/call "
                     "| WAL rec/call | statement |")
            L.append("|---|---|---|---|---|---|---|---|---|")
            for s in pr["statements"]:
                q = s["query"].replace("|", "\\|")
                if len(q) > 220:
                    q = q[:217] + "…"
                L.append(f"| {'y' if s['toplevel'] else ''} | {s['calls']:,} | {s['total_ms']:,.0f} "
                         f"| {s['mean_ms']:.3f} | {s['rows_per_call']:.2f} | {s['blks_hit_per_call']:.1f} "
                         f"| {s['blks_dirtied_per_call']:.2f} | {s['wal_per_call']:.1f} | `{q}` |")
            L.append("")
        if pr.get("functions"):
            L.append("### Functions (pg_stat_user_functions)\n")
            L.append("| function | calls | total ms | self ms | self ms/call |\n|---|---|---|---|---|")
            for f in pr["functions"]:
                L.append(f"| {f['function']} | {f['calls']:,} | {f['total_ms']:,.0f} | {f['self_ms']:,.0f} "
                         f"| {f['self_mean_ms']:.4f} |")
            L.append("")
        t = pr.get("tables", {}).get("tables", {})
        if t:
            L.append("### Tables after the run\n")
            L.append("| table | live | dead | updates | HOT updates | size |\n|---|---|---|---|---|---|")
            for name, v in t.items():
                L.append(f"| {name} | {v['live']:,} | {v['dead']:,} | {v['upd']:,} | {v['hot_upd']:,} "
                         f"| {fmt_bytes(v['bytes'])} |")
            L.append("")
    if prof.get("plans"):
        L.append("## EXPLAIN (ANALYZE, BUFFERS) of every statement of one create, dequeue and complete\n")
        L.append("auto_explain with log_nested_statements, one call each, single session.\n")
        L.extend(prof["plans"])
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------- plots

def plots(data: dict, latencies: dict, base: Path) -> dict:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots (pip install -e '.[bench]')", flush=True)
        return {}
    out = {}
    data = of_version(data, last_version(data))
    runs = data["runs"]
    groups = [g for g in data["groups"] if any(r["group"] == g for r in runs)]

    # 1. throughput against clients, one panel per scenario group
    if groups:
        cols = min(3, len(groups))
        rows = math.ceil(len(groups) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False)
        for ax, g in zip(axes.flat, groups):
            keys = list(dict.fromkeys(r["variant"] for r in runs if r["group"] == g))
            for key in keys:
                pts = sorted((r["clients"], r["msgs_per_s"], r["title"]) for r in runs if r["variant"] == key)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=_short(pts[0][2]))
            if g != "baseline":
                pts = sorted((c, reference_rate(data, c)) for c in {r["clients"] for r in runs})
                pts = [p for p in pts if p[1]]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], ls="--", color="grey",
                            label="at-most-once baseline")
            ax.set_title(data["groups"][g], fontsize=9)
            ax.set_xlabel("clients")
            ax.set_ylabel("messages consumed / s")
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({r["clients"] for r in runs}))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(groups):]:
            ax.axis("off")
        fig.suptitle(f"lonnymq: throughput against clients ({data['env']['cores']} cores)")
        fig.tight_layout()
        out["throughput"] = str(base.parent / f"{base.name}-throughput.png")
        fig.savefig(out["throughput"], dpi=90)
        plt.close(fig)

    # 2. latency distribution (CDF) at the target client count
    n = target_clients(data)
    series = [(r["title"], latencies.get((r["variant"], n))) for r in runs if r["clients"] == n]
    series = [(t, s) for t, s in series if s and len(s) >= 20]
    if series:
        fig, ax = plt.subplots(figsize=(8, 4.8))
        for title, s in series:
            xs = sorted(v / 1000 for v in s)
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.plot(xs, ys, label=_short(title))
        ax.set_xscale("log")
        ax.set_xlabel("create-to-dequeue latency (ms, log)")
        ax.set_ylabel("fraction of messages")
        ax.set_title(f"Latency distribution, {n} clients")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out["latency"] = str(base.parent / f"{base.name}-latency.png")
        fig.savefig(out["latency"], dpi=90)
        plt.close(fig)

    # 3. consume cost against backlog
    cases = []
    if any(r["variant"] == "lifecycle_1ch" for r in runs):
        cases.append(("empty", "lifecycle_1ch"))
    for r in runs:
        if r["group"] == "backlog" and r["variant"] not in [c[1] for c in cases]:
            label = (f"{_human(r['backlog'])} future" if r["variant"].endswith("_future")
                     else f"{_human(r['backlog'])} ready")
            cases.append((label, r["variant"]))
    if any(r["variant"] == "saturated" for r in runs):
        cases.append(("saturated ch.", "saturated"))
    if len(cases) >= 2:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        xs = list(range(len(cases)))
        for c in sorted({r["clients"] for r in runs}):
            for ax, fn in zip(axes, (consume_cost, lambda r: server_ms(r, "dequeue") if r else None)):
                ys = [fn(run_of(data, key, c)) for _, key in cases]
                ax.plot([x for x, y in zip(xs, ys) if y], [y for y in ys if y], marker="o", label=f"{c} clients")
        for ax, t in zip(axes, ("dequeue + complete (mean server ms per call)", "dequeue alone (mean server ms)")):
            ax.set_xticks(xs)
            ax.set_xticklabels([c[0] for c in cases], fontsize=8)
            ax.set_ylabel("ms (log)")
            ax.set_yscale("log")
            ax.set_title(t, fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle("Cost against backlog (flat is the goal)")
        fig.tight_layout()
        out["backlog"] = str(base.parent / f"{base.name}-backlog.png")
        fig.savefig(out["backlog"], dpi=90)
        plt.close(fig)

    # 4. held snapshot: msg/s for every second, time 0 = the snapshot
    hs = [h for h in (data.get("held") or {}).get("runs", []) if h.get("t_hold_start") is not None]
    if hs:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
        for h in hs:
            xs = [i + 0.5 - h["t_hold_start"] for i in range(len(h["per_second"]))]
            ys = h["per_second"]
            ls = "-" if h.get("backlog") else "--"  # dashed: the near-empty queue
            axes[0].plot(xs, [max(y, 0.5) for y in ys], lw=1, ls=ls, label=h["title"])  # log axis: no zeros
            if h.get("rate_before"):
                axes[1].plot(xs, [y / h["rate_before"] for y in ys], lw=1, ls=ls, label=h["title"])
        hold_end = max((h["t_hold_end"] or h["t_hold_start"]) - h["t_hold_start"] for h in hs)
        for ax in axes:
            ax.axvspan(0, hold_end, color="grey", alpha=0.15, label="snapshot held")
            ax.set_xlabel("seconds since the snapshot was taken")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
        axes[0].set_yscale("log")
        axes[0].set_ylabel("messages consumed / s (log)")
        axes[0].set_title("msg/s per second", fontsize=10)
        axes[1].set_ylabel("× msg/s before the snapshot")
        axes[1].set_ylim(0, 1.5)
        axes[1].axhline(HELD_RATE_MIN, ls="--", color="grey", lw=1)
        axes[1].set_title(f"relative to the {hs[0].get('window_before_s') or 0:.0f} s before the snapshot "
                          f"(dashed: the {HELD_RATE_MIN:g} × target)", fontsize=10)
        fig.suptitle(f"Held snapshot: {hs[0]['clients']} clients, a REPEATABLE READ transaction held "
                     f"{hs[0]['hold_s']:g} s")
        fig.tight_layout()
        out["held"] = str(base.parent / f"{base.name}-held.png")
        fig.savefig(out["held"], dpi=90)
        plt.close(fig)
    return out


def _short(title: str) -> str:
    return title if len(title) <= 48 else title[:45] + "…"


def _human(n) -> str:
    if not n:
        return "0"
    if n >= 1_000_000:
        return f"{n / 1_000_000:g}M"
    if n >= 1000:
        return f"{n / 1000:g}k"
    return str(n)
