#!/usr/bin/env python3
"""Lines of code in message_dequeue and every function it reaches.

Counts the lines of the function bodies (between AS $$ and $$;) in
sql/src/ that are neither blank nor comments, following calls by name from
message_dequeue, transitively: the size measure of the issue that rebuilt
the dequeue (0.7.0: 1,245 lines in 23 functions).  Usage:
tools/dequeue_size.py [root function] (default message_dequeue)
[--max N]: print only the total, and exit 1 when it is over N (make lint: 1152).  The
budget grew from 0.7.0's 700 to 869: name patterns (0.12.0, +67), the fixes and bounds
of 0.13.1 (+62), the worker loop's cost brought back to 0.13.0's by moving probes out of
line (0.13.1, +24), and a raise that no longer passes what its own transaction took out
of the due view, which a rollback made due again (0.15.0, _due_taken_note, +18).  Then
periodic messages left the take's path (0.15.0: a schedule's occurrence is promoted like
any scheduled message; _schedule_run and message_create, -162), and the housekeeping got
one entry point, before the take, whose raise needs only how many positions the take may
consume and writes nothing on an idle queue (0.15.0, _housekeeping, +13), and a create into a
full limited channel holds its message at once, so admission's walk tries the hold guard
and leaves a wake, which promotion runs and backs off (0.15.0, _channel_hold_try, +19).  Then a
channel with max_concurrency and no release interval, pause or order claims at the take
(0.15.0, _channel_claim and the take's retakes past refused claims, +115: the limited worker
loop 1.5 to 1.7 times as fast), while rate-limited, paused and ordered channels keep admission
by promotion: moving them to claims is what would retire it, step 4 of the take and
_channel_release_try_lock (doc/dequeue-design.md).  A channel's pending wake is found by
its id, kept in its row, where a search walked all its messages that are not ready (0.15.0,
_channel_wake, +1 once _channel_claim read its row's version once), and the take's release
of a rate-limited channel became a wake (0.15.0, _channel_release, +4; below), and the
early messages' probes pass the dead entries of those taken, which a long-held snapshot
keeps, by the position mark (0.15.0, message_early_ix, +2: the mark's own variable).  Then
dependencies (0.16.0, +290): a dequeue's promotion runs the release rows of ended parents
(_message_release_run, _message_waits_resolve, _message_waits_count_down, and a dead or
cancelled parent's dependents ended with it, _message_dependent_end), and a buried message
with dependents leaves one (_message_release); the take is unchanged (394).  Issue 40's
target is 560 (the take alone 350): a change that needs more lines should retire some.

--take counts the take alone: message_complete_dequeue without what only its
housekeeping (_housekeeping: promotion, admission, schedules, the marks' raise) or its
completion reaches (make lint: 394; issue 40's target 350).  Since 0.15.0 the take admits
nothing: a delivery in a channel with a release interval leaves a wake at the interval's
end (_channel_release), where step 4 ran the admission walk (_channel_admit and what it
reaches, 149 lines: the take alone 540 before, the whole path +4).

The completion that message_complete_dequeue runs first (0.10.0) is not the
delivery: _message_complete_set, and what only it reaches, is left out (it is
message_complete's and message_complete_batch's code; `--with-completion`
counts it too).  A constant (an IMMUTABLE SQL function that selects a
literal, such as _max_duration_ms) counts no lines: the planner folds it
into its callers' plans.
"""

from __future__ import annotations

import pathlib
import re
import sys

import manifest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "sql" / "src"


def functions() -> dict[str, str]:
    """Each function's body, by name."""
    found: dict[str, str] = {}
    for d in manifest.definitions():
        constant = re.fullmatch(r"\s*SELECT [-0-9.]+(::\w+)?\s*", d.body)
        found[d.name] = "" if constant and re.search(r"LANGUAGE sql\s+IMMUTABLE", d.attributes) else d.body
    return found


def code_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("--"))


def main() -> int:
    args = sys.argv[1:]
    limit = None
    if "--max" in args:
        i = args.index("--max")
        limit = int(args[i + 1])
        del args[i:i + 2]
    with_completion = "--with-completion" in args
    take = "--take" in args
    args = [a for a in args if a not in ("--with-completion", "--take")]
    start = "message_complete_dequeue" if take else args[0] if args else "message_dequeue"
    funcs = functions()
    if not with_completion:
        funcs.pop("_message_complete_set", None)
    if take:
        funcs.pop("_housekeeping", None)
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in funcs:
            continue
        seen.add(name)
        body = funcs[name]
        todo += [n for n in re.findall(r"@extschema@\.(\w+)\(", body) if n in funcs]
    total = sum(code_lines(funcs[n]) for n in seen)
    for name in sorted(seen) if limit is None else ():
        print(f"{code_lines(funcs[name]):5d}  {name}")
    print(f"{total:5d}  total: {len(seen)} functions reached from {start}")
    if limit is not None and total > limit:
        print(f"error: {total} lines of code reached from {start}, more than {limit}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
