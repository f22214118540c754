"""Signals that end a process without cleanup by default (SIGTERM from `kill`, `timeout`,
systemd or docker; SIGHUP from a closed terminal), turned into exceptions while a block
runs, so that the block's `finally` and `except` clauses run as they do for Ctrl-C."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

ENDING = ("SIGTERM", "SIGHUP")


def exit_status(signum: int) -> BaseException:
    """SystemExit with the status a shell reports for the signal (128 + its number)."""
    return SystemExit(128 + signum)


@contextmanager
def ending_signals_raise(make: Callable[[int], BaseException] = exit_status,
                         names: Sequence[str] = ENDING) -> Iterator[None]:
    """While inside, the signals `names` (those this platform has) raise `make(signum)`.
    Only where the default handler is in place: a handler of the program's own stays, and
    so does everything outside the main thread (only it can set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise make(signum)

    previous = {}
    for name in names:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, None):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
