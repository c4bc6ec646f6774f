"""Topics: the cost of fan-out.  message_publish to 1, 10 and 100 channels
(exact bindings), and to 10 channels through a wildcard pattern beside 100
other wildcard bindings that every publish tests, against what a producer
would write by hand without topics: one statement of N message_create calls
in one transaction.  8 pgbench clients (prepared statements), interleaved
rounds on a private cluster, synchronous_commit on, and off in one more
round; each run starts from an empty queue.  msg/s counts messages created
(a publish to N channels creates N).  Writes bench/results/<name>.md.

    .venv/bin/python -m bench.publish [--rounds 3] [--seconds 10] [--name NAME]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from datetime import datetime
from pathlib import Path

from bench.pgbench_worker import CLIENTS, pgbench
from bench.run import ROOT, Target, log
from bench.scenarios import reset_lonnymq

FANOUT = (1, 10, 100)
OTHER_WILDCARDS = 100


def channels(n: int) -> str:
    return "ARRAY[" + ", ".join(f"'fan{n}-{i}'" for i in range(n)) + "]"


# key: (channels per transaction, script, title)
SCRIPTS = {
    **{f"publish_{n}": (n, f"SELECT lonnymq.message_publish('fan.{n}', '\\x00');\n",
                        f"message_publish to {n} channel{'s' if n > 1 else ''} (exact bindings)") for n in FANOUT},
    **{f"by_hand_{n}": (n, f"SELECT count(lonnymq.message_create(c, '\\x00')) FROM unnest({channels(n)}) AS c;\n",
                        f"{n} message_create in one statement, by hand") for n in FANOUT},
    "publish_10_wild": (10, "SELECT lonnymq.message_publish('wild.x', '\\x00');\n",
                        f"message_publish to 10 channels through 'wild.*', beside {OTHER_WILDCARDS} other wildcard bindings"),
}
ORDER = ["by_hand_1", "publish_1", "by_hand_10", "publish_10", "publish_10_wild", "by_hand_100", "publish_100"]


def setup(conn) -> None:
    """An empty queue and the bindings every script reaches."""
    reset_lonnymq(conn)
    for n in FANOUT:
        conn.execute(f"SELECT count(lonnymq.topic_bind('fan.{n}', c)) FROM unnest({channels(n)}) AS c")
    conn.execute(f"SELECT count(lonnymq.topic_bind('wild.*', c)) FROM unnest({channels(10)}) AS c")
    conn.execute(f"SELECT count(lonnymq.topic_bind('other' || i || '.#', 'other')) "
                 f"FROM generate_series(1, {OTHER_WILDCARDS}) AS i")
    conn.execute("ANALYZE")
    conn.execute("CHECKPOINT")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--name", default=datetime.now().strftime("%Y-%m-%d") + "-publish")
    args = p.parse_args()
    target = Target()
    modes = {"on": None, "off": "-c synchronous_commit=off"}
    rates: dict[str, dict[str, list[float]]] = {m: {k: [] for k in ORDER} for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for key, (_, text, _) in SCRIPTS.items():
            files[key] = Path(tmp) / f"{key}.sql"
            files[key].write_text(text)
        try:
            target.start()
            with target.connect() as conn:
                version = conn.execute("SELECT version()").fetchone()[0].split(",")[0]
            for mode, rounds in (("on", args.rounds), ("off", 1)):
                for r in range(rounds):
                    for key in ORDER:
                        with target.connect() as conn:
                            setup(conn)
                        tps = pgbench(target, files[key], args.seconds, defines=(), options=modes[mode])
                        rates[mode][key].append(tps * SCRIPTS[key][0])
                        log(f"  [sync {mode}, round {r + 1}/{rounds}] {key}: {rates[mode][key][-1]:,.0f} msg/s")
        finally:
            target.stop()
    lines = [
        f"# Topics: the cost of fan-out — {args.name}\n",
        f"`bench/publish.py`: {CLIENTS} pgbench clients (`-M prepared`), {args.seconds:g} s per run, "
        f"{args.rounds} interleaved rounds with synchronous_commit on and 1 with it off, each run from an "
        f"empty queue; {version}. msg/s counts messages created: one publish to N channels creates N. "
        "\"By hand\" is what a producer writes without topics: N `message_create` in one statement.\n",
    ]
    for mode in modes:
        med = {k: statistics.median(v) for k, v in rates[mode].items()}
        n_rounds = len(rates[mode][ORDER[0]])
        lines += [
            f"\n## synchronous_commit {mode}\n",
            "| producer | " + " | ".join(f"round {i + 1}" for i in range(n_rounds))
            + " | median msg/s | publishes/s | × by hand |",
            "|---|" + "---|" * n_rounds + "---|---|---|",
        ]
        for key in ORDER:
            n = SCRIPTS[key][0]
            ratio = f"{med[key] / med[f'by_hand_{n}']:.2f}" if not key.startswith("by_hand") else ""
            lines.append(f"| {SCRIPTS[key][2]} | " + " | ".join(f"{v:,.0f}" for v in rates[mode][key])
                         + f" | {med[key]:,.0f} | {med[key] / n:,.0f} | {ratio} |")
    out = ROOT / "bench" / "results" / f"{args.name}.md"
    out.write_text("\n".join(lines) + "\n")
    log(f"report: {out}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
