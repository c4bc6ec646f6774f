"""Worker threads of the long-running tests (test_long_transaction,
test_soak): a failure in one thread is recorded and stops the run, instead
of dying silently with the thread."""

from __future__ import annotations

import threading
from typing import Callable


def guarded(fn: Callable, args: tuple, errors: list[str], lock: threading.Lock,
            *stop: threading.Event) -> None:
    """fn(*args); any exception is appended to errors (under lock) as
    "fn(args): exc", and each of the stop events is set."""
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001
        with lock:
            errors.append(f"{fn.__name__}{args}: {exc!r}")
        for event in stop:
            event.set()
