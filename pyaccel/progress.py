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
