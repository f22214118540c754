"""Resident memory of the bench process, read from Linux's /proc/self: what a method adds, and peaks.

What is measured, per method (bytes; None where /proc is not available, e.g. macOS):
- bind: resident memory added by creating the method and its warm-up generation: a draft
  model's weights (file-backed: its GGUF pages mapped and read) and its context (anonymous:
  KV cache, compute buffers), n-gram caches, a peer's second llama.cpp instance. Split as
  file-backed and anonymous, since weights are file pages the kernel may share or drop.
- run growth: the largest rise of resident memory during one of its generations over the
  resident memory before it (buffers that live only while generating).
- peak: the process's resident high-water mark during its generations (every method's
  state is loaded at once in a bench, so this is the whole process's peak).
- alone: base + bind + run growth, where base is the process with the target loaded and
  nothing else: the peak the method would have run alone. extra over plain: alone minus
  plain decoding's alone.
Allocator reuse makes a small delta (a few MiB) noise; the split is the kernel's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")
# Writing this to clear_refs resets the peak (VmHWM) to the current RSS (Linux >= 4.0).
_RESET_PEAK = "5"


@dataclass(frozen=True)
class MemorySample:
    rss: int
    peak: int
    anon: int
    file: int


def _status_bytes(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in _KEYS:
            out[key] = int(value.split()[0]) * 1024  # the kernel writes kB
    return out


def parse_status(text: str) -> MemorySample | None:
    """A sample from the text of /proc/self/status; None when a field is missing."""
    values = _status_bytes(text)
    if not all(k in values for k in _KEYS):
        return None
    return MemorySample(values["VmRSS"], values["VmHWM"], values["RssAnon"] + values["RssShmem"], values["RssFile"])


def sample() -> MemorySample | None:
    try:
        return parse_status(_STATUS.read_text(encoding="ascii"))
    except OSError:
        return None


def reset_peak() -> bool:
    """Reset the process's resident high-water mark; False where the system does not allow it."""
    try:
        _CLEAR_REFS.write_text(_RESET_PEAK, encoding="ascii")
    except OSError:
        return False
    return True


@dataclass
class MethodMemory:
    """What one method added (see the module's docstring); None: not measurable here."""

    base: int | None = None
    bind: int | None = None
    bind_anon: int | None = None
    bind_file: int | None = None
    run_growth: int | None = None
    peak: int | None = None

    @property
    def alone(self) -> int | None:
        if self.base is None or self.bind is None or self.run_growth is None:
            return None
        return self.base + self.bind + self.run_growth


def bind_memory(base: MemorySample | None, before: MemorySample | None, after: MemorySample | None) -> MethodMemory:
    """The memory a method added between `before` and `after` its binding and warm-up."""
    if base is None or before is None or after is None:
        return MethodMemory()
    return MethodMemory(base.rss, after.rss - before.rss, after.anon - before.anon, after.file - before.file)


class RunPeak:
    """Around one generation: reset the peak before, record growth and peak after."""

    def __init__(self, memory: MethodMemory) -> None:
        self.memory = memory
        self.before: MemorySample | None = None
        self.resettable = False

    def __enter__(self) -> "RunPeak":
        self.resettable = reset_peak()
        self.before = sample()
        return self

    def __exit__(self, *exc: object) -> None:
        after = sample()
        if after is None or self.before is None or not self.resettable:
            return
        m = self.memory
        growth = max(0, after.peak - self.before.rss)
        m.run_growth = growth if m.run_growth is None else max(m.run_growth, growth)
        m.peak = after.peak if m.peak is None else max(m.peak, after.peak)


def extra_over_plain(method: MethodMemory, plain: MethodMemory) -> int | None:
    a, b = method.alone, plain.alone
    return None if a is None or b is None else a - b


def mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.0f}"
