"""One generation at a time per model, in arrival order, behind a bounded queue.

The event loop never runs llama.cpp: a request becomes a `Job`, `Scheduler.submit` puts it
at the back of the queue (or refuses it when the queue is full), and one worker thread
runs the jobs in order, handing each text piece back to the job's event loop as it is
decided. A job whose client has gone is cancelled: a waiting one is skipped, a running
one has its stream closed at the next piece, which settles the KV cache and frees the
model for the next job at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import dataclass, field
import typing
from typing import Any, AsyncIterator, cast

from ..generator import Generator
from ..types import Result

# How long `close` waits for the running generation to notice its cancellation.
CLOSE_JOIN_S = 10.0


class QueueFullError(RuntimeError):
    """The queue already holds as many waiting requests as it may."""


class SchedulerClosedError(RuntimeError):
    """The scheduler was closed (the server is shutting down): it takes no more jobs."""


class _End:
    """Marks the end of a job's events."""


@dataclass(frozen=True)
class Work:
    """What a job generates: `generator.stream(prompt, **options)`."""

    generator: Generator
    prompt: list[int]
    options: dict[str, Any] = field(default_factory=dict)


class Job:
    """One request's generation, created on the event loop that will read its events."""

    def __init__(self, work: Work) -> None:
        self.work = work
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[str | Result | BaseException | _End] = asyncio.Queue()
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def cancel_event(self) -> threading.Event:
        """Set when the job is cancelled: the generation it runs ends at its next prompt chunk or step."""
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled.set()

    def interrupt(self, error: BaseException) -> None:
        """From the job's loop: end its events with `error` at once, and cancel it."""
        self._events.put_nowait(error)
        self.cancel()

    def put(self, item: str | Result | BaseException | _End) -> None:
        """From the worker thread: hand one event to the job's loop."""
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, item)
        except RuntimeError:  # the loop is closed: the server is shutting down
            self.cancel()

    async def items(self) -> AsyncIterator[str | Result]:
        """Text pieces, then the Result; a failed generation raises its error here.
        Leaving early (a client gone, an error) cancels the job."""
        try:
            while True:
                item = await self._events.get()
                if isinstance(item, _End):
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.cancel()


def execute(job: Job) -> None:
    """Run one job to its end or its cancellation (in the worker thread)."""
    # Generator.stream is a generator: closing it ends the generation cleanly.
    stream = cast(typing.Generator[str | Result, None, None],
                  job.work.generator.stream(job.work.prompt, cancel=job.cancel_event, **job.work.options))
    try:
        for item in stream:
            job.put(item)
            if job.cancelled:
                break
    except Exception as exc:  # the client gets it as an error response or event
        job.put(exc)
    finally:
        stream.close()  # an unfinished generation ends here: the cache is settled, the turn released
        job.put(_End())


class Scheduler:
    """A FIFO of jobs run by one worker thread; at most `max_waiting` wait behind the running one."""

    def __init__(self, max_waiting: int) -> None:
        if max_waiting < 0:
            raise ValueError(f"max_waiting must be >= 0, got {max_waiting}")
        self.max_waiting = max_waiting
        self._cond = threading.Condition()
        self._waiting: deque[Job] = deque()
        self._running: Job | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="pyaccel-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Queue `job` behind those already there; QueueFullError when the queue is full,
        SchedulerClosedError once closed."""
        with self._cond:
            if self._closed:
                raise SchedulerClosedError("the server is shutting down")
            waiting = sum(not j.cancelled for j in self._waiting)
            if waiting >= self.max_waiting and (self._running is not None or waiting > 0):
                raise QueueFullError(
                    f"{waiting} requests are already waiting for this model (the most this server queues): "
                    "retry later"
                )
            self._waiting.append(job)
            self._cond.notify_all()

    def load(self) -> tuple[int, int]:
        """(running, waiting) jobs now."""
        with self._cond:
            running = int(self._running is not None)
            return running, sum(not j.cancelled for j in self._waiting)

    def close(self) -> None:
        """Cancel every job and stop the worker."""
        with self._cond:
            self._closed = True
            for job in self._waiting:
                job.cancel()
            if self._running is not None:
                self._running.cancel()
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(CLOSE_JOIN_S)

    def _next(self) -> Job | None:
        with self._cond:
            while not self._closed:
                while self._waiting and self._waiting[0].cancelled:
                    self._waiting.popleft().put(_End())
                if self._waiting:
                    self._running = self._waiting.popleft()
                    return self._running
                self._cond.wait()
            for job in self._waiting:
                job.put(_End())
            return None

    def _work(self) -> None:
        while (job := self._next()) is not None:
            try:
                execute(job)
            finally:
                with self._cond:
                    self._running = None
