"""Metrics: what one scrape costs.  On a private cluster, N channels of M
ready messages each (default 10,000 x 100 = 1,000,000): one read of
lonnymq.metrics_text() (the view lonnymq.metrics rendered), timed and
counted in index entries returned and shared buffers, against the view
channel_stats (every message); first with the channels unconfigured (the
series '*'), then under one pattern covering them.  Medians of --reps
reads.  Writes bench/results/<name>.md.

    .venv/bin/python -m bench.metrics [--channels 10000] [--per-channel 100] [--reps 5] [--name NAME]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import datetime

from bench.run import ROOT, Target, log
from bench.scenarios import reset_lonnymq
from lonnymq_dev.calls import index_entries_read



def read(conn, sql: str, reps: int) -> tuple[float, int, int]:
    """Median ms, index entries returned and shared buffers of one read."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        conn.execute(sql).fetchall()
        times.append((time.perf_counter() - start) * 1000)
    entries = index_entries_read(conn, sql)
    plan = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}").fetchone()[0][0]["Plan"]
    return statistics.median(times), entries, plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--channels", type=int, default=10_000)
    p.add_argument("--per-channel", type=int, default=100)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--name", default=datetime.now().strftime("%Y-%m-%d") + "-metrics")
    args = p.parse_args()
    target = Target()
    rows = []
    try:
        target.start()
        with target.connect() as conn:
            version = conn.execute("SELECT version()").fetchone()[0].split(",")[0]
            reset_lonnymq(conn)
            conn.execute(
                "SELECT count(*) FROM generate_series(1, %s) AS g, "
                "LATERAL lonnymq.message_create_batch('tenant-' || g, array_fill('x'::bytea, ARRAY[%s]))",
                (args.channels, args.per_channel),
            )
            conn.execute("VACUUM ANALYZE lonnymq.message")
            for shape in ("unconfigured (series *)", "under the pattern tenant-*"):
                if "pattern" in shape:
                    conn.execute("SELECT lonnymq.channel_set('tenant-*', p_max_attempts => 5)")
                for what, sql, reps in (
                    ("metrics_text()", "SELECT lonnymq.metrics_text()", args.reps),
                    ("the view channel_stats", "SELECT * FROM lonnymq.channel_stats", max(1, args.reps // 2)),
                ):
                    ms, entries, buffers = read(conn, sql, reps)
                    rows.append((shape, what, ms, entries, buffers))
                    log(f"  {shape}: {what}: {ms:,.0f} ms, {entries:,} entries, {buffers:,} buffers")
    finally:
        target.stop()
    total = args.channels * args.per_channel
    lines = [
        f"# Metrics: one scrape — {args.name}\n",
        f"`bench/metrics.py --channels {args.channels} --per-channel {args.per_channel} --reps {args.reps}`: "
        f"{total:,} ready messages in {args.channels:,} channels on a private cluster; {version}; the default "
        "`lonnymq.metrics_count_limit` (10,000). Time: median of the reads (channel_stats: half as many); "
        "entries: index entries returned by one read over lonnymq's indexes "
        "(`pg_stat_get_xact_tuples_returned`); buffers: shared buffers of one read (`EXPLAIN (ANALYZE, BUFFERS)`).\n",
        "| channels | read | ms | index entries | per channel | shared buffers |",
        "|---|---|---|---|---|---|",
    ]
    for shape, what, ms, entries, buffers in rows:
        lines.append(f"| {shape} | {what} | {ms:,.0f} | {entries:,} | {entries / args.channels:.1f} | {buffers:,} |")
    out = ROOT / "bench" / "results" / f"{args.name}.md"
    out.write_text("\n".join(lines) + "\n")
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
