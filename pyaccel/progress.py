"""A dependency-free progress bar for long work (model pulls, cost measurements)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Prints `label [####....] 42% 12.3/100.0 MB` to stderr, redrawn at most 10 times a second.

    On a non-terminal stream it prints one line per 10% instead of redrawing.
    """

    def __init__(self, label: str, total: int, unit: str = "MB", stream: TextIO | None = None) -> None:
        self.label = label
        self.total = max(int(total), 1)
        self.unit = unit
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._last_draw = 0.0
        self._last_decile = -1

    def _scale(self, n: int) -> float:
        return n / 1e6 if self.unit == "MB" else float(n)

    def update(self, n: int) -> None:
        self.done = min(self.done + n, self.total)
        self._draw(final=False)

    def _draw(self, final: bool) -> None:
        frac = self.done / self.total
        now = time.monotonic()
        if self._tty:
            if not final and now - self._last_draw < 0.1:
                return
            bar = "#" * int(frac * 30)
            self._stream.write(
                f"\r{self.label} [{bar:<30}] {frac * 100:5.1f}% "
                f"{self._scale(self.done):.1f}/{self._scale(self.total):.1f} {self.unit}"
            )
            if final:
                self._stream.write("\n")
        else:
            decile = int(frac * 10)
            if decile == self._last_decile:
                return
            self._last_decile = decile
            self._stream.write(f"{self.label}: {frac * 100:.0f}%\n")
        self._last_draw = now
        self._stream.flush()

    def close(self) -> None:
        self._draw(final=True)


def clock(seconds: float) -> str:
    """12:05 or 1:02:05."""
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class StatusLine:
    """`label: message, 3:12 elapsed, ~1:40 left` for long work measured in time or in a
    fraction done; printed at most every `every` seconds (redrawn in place on a terminal)."""

    def __init__(self, label: str, every: float = 10.0, stream: TextIO | None = None) -> None:
        self.label = label
        self.every = every
        self._stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._start = time.monotonic()
        self._last = -float("inf")
        self._open = False

    def show(self, message: str, fraction: float | None = None, force: bool = False) -> None:
        """`fraction` of the work done (0..1) gives the estimate of time left."""
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        self._last = now
        elapsed = now - self._start
        left = ""
        if fraction is not None and fraction > 0:
            left = f", ~{clock(elapsed * (1 - min(fraction, 1.0)) / fraction)} left"
        line = f"{self.label}: {message}, {clock(elapsed)} elapsed{left}"
        if self._tty:
            self._stream.write(f"\r\x1b[K{line}")
            self._open = True
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def close(self, message: str | None = None) -> None:
        if message is not None:
            self.show(message, force=True)
        if self._open:
            self._stream.write("\n")
            self._stream.flush()
            self._open = False
