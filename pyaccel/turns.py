"""One generation at a time per Model, in arrival order.

llama.cpp's context is not thread-safe: two decodes on one context at once abort the
process. Every call that touches a Model's context (a generation, binding a method that
measures costs) takes the Model's turn first; callers from other threads wait, first come
first served. A thread that already holds the turn (an unfinished stream it is still
iterating) gets a clear error instead of waiting for itself forever. The holder is the
thread that last advanced the stream (`adopt`): a thread pool may resume one stream on
another thread, and the first thread is then free to wait for a turn of its own.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class TurnLock:
    """A FIFO lock that knows its holder."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next_ticket = 0
        self._serving = 0
        self._owner: int | None = None

    @contextmanager
    def turn(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                raise RuntimeError(
                    "this thread already has a generation open on this model (an unfinished stream): "
                    "iterate it to the end or close() it before starting another"
                )
            ticket = self._next_ticket
            self._next_ticket += 1
            while self._serving != ticket:
                self._cond.wait()
            self._owner = me
        try:
            yield
        finally:
            with self._cond:
                self._owner = None
                self._serving += 1
                self._cond.notify_all()

    def held_here(self) -> bool:
        """Does the calling thread hold the turn?"""
        with self._cond:
            return self._owner == threading.get_ident()

    def adopt(self) -> None:
        """The turn, held, now belongs to the calling thread (a stream resumed there)."""
        with self._cond:
            if self._owner is not None:
                self._owner = threading.get_ident()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """The turn, or nothing when the calling thread holds it already (it is between two
        steps of its own stream, so no decode runs)."""
        if self.held_here():
            yield
            return
        with self.turn():
            yield

    @property
    def waiting(self) -> int:
        """Callers queued behind the current holder (the holder not counted)."""
        with self._cond:
            return max(0, self._next_ticket - self._serving - (1 if self._owner is not None else 0))
