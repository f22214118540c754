"""`pyaccel bench --placements`: what each placement of the weights costs on this CPU.

One backend per placement: pyaccel's default, the same again (the plain-vs-plain control),
llama.cpp's own (where it has no AMX buffer type, or with --amx: its AMX matmul faults on
some CPUs), AMX kept out by overrides (where llama.cpp has no AMX: the same placement as its
own, reached another way) and the extra buffer types off (no repacked kernels). All are
loaded at once and timed in rotating order each round: a one-token decode (plain
decoding's step) and a 16-token decode (a verification), at a fixed context depth. Each is
a ratio to the default per round, pooled as a geometric mean with a bootstrap interval
over the rounds.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .. import weights
from ..backend import ContextConfig, LlamaBackend, ggml_library
from .pooled import geometric_mean

# Context depth the decodes are timed at, and the tokens of a verification.
DEPTH = 256
VERIFY = 16
# Timed decodes of each kind per backend per round (their median is the round's time).
REPEATS = 8
# Bootstrap resamples of the rounds for the 95% interval.
RESAMPLES = 2000
DEFAULT = "default"
CONTROL = "default:"

Chooser = Callable[[Path], weights.Placement]


def choosers(amx: bool) -> dict[str, Chooser]:
    """The placements compared, by name, the default first; llama.cpp's own only where it
    is safe to run or asked for (`amx`)."""
    lib = ggml_library()
    default: Chooser = lambda path: weights.choose(lib, path, amx=False, n_gpu_layers=0)  # noqa: E731
    named = {DEFAULT: default, CONTROL: default}
    if amx or weights.AMX not in weights.cpu_extra_buffer_types(lib):
        named["own"] = lambda path: weights.Placement()
    named["amx-out"] = lambda path: weights.without_amx(lib, path, n_gpu_layers=0)
    named["no-extra"] = lambda path: weights.Placement(use_extra_bufts=False, summary="no repacked kernels",
                                                       tag="noextra")
    return named


@dataclass(frozen=True)
class Ratio:
    """Time of the default placement over this one's (> 1: this one is faster)."""

    name: str
    kind: str  # "decode" (1 token) or "verify" (VERIFY tokens)
    geomean: float
    low: float
    high: float
    summary: str  # what the placement did


def _time(backend: LlamaBackend, n: int) -> float:
    """Median seconds of REPEATS decodes of n tokens after DEPTH cached ones."""
    tokens = np.full(n, 1000, dtype=np.int32)
    pos = np.arange(DEPTH, DEPTH + n)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        backend.decode(tokens, pos)
        times.append(time.perf_counter() - t0)
        backend.kv_remove(0, DEPTH, -1)
    return statistics.median(times)


def time_placements(path: Path, rounds: int, n_threads: int | None, amx: bool = False,
                    progress: Callable[[str], None] = lambda line: None) -> list[Ratio]:
    """Ratios of every placement but the default, for both kinds of decode."""
    config = ContextConfig(n_ctx=DEPTH + VERIFY + 64, n_threads=n_threads)
    backends: dict[str, LlamaBackend] = {}
    try:
        for name, choose in choosers(amx).items():
            backends[name] = b = LlamaBackend(path, config, placement=choose(path))
            b.prefill(list(range(100, 100 + DEPTH)), start_pos=0)
        for b in backends.values():  # a first decode of each kind pays for one-time set-up
            _time(b, 1), _time(b, VERIFY)
        seconds: dict[tuple[str, int], list[float]] = {}
        names = list(backends)
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                for n in (1, VERIFY):
                    seconds.setdefault((name, n), []).append(_time(backends[name], n))
            progress(f"round {r + 1}/{rounds}")
        out = []
        for name in names[1:]:
            for n, kind in ((1, "decode"), (VERIFY, "verify")):
                per_round = [a / b for a, b in zip(seconds[(DEFAULT, n)], seconds[(name, n)])]
                pooled = geometric_mean(per_round, draws=RESAMPLES)
                assert pooled.low is not None and pooled.high is not None  # drawn: RESAMPLES > 0
                out.append(Ratio(name, kind, pooled.value, pooled.low, pooled.high, backends[name].placement.summary))
        return out
    finally:
        for b in backends.values():
            b.close()


def report(ratios: list[Ratio], rounds: int) -> str:
    lines = [f"speed against pyaccel's default placement: geometric mean over {rounds} rounds (95% interval); "
             f"decode = 1 token, verify = {VERIFY} tokens, at depth {DEPTH}",
             f"{'placement':<10} {'kind':<7} {'ratio':>6}  interval       what"]
    for r in ratios:
        lines.append(f"{r.name:<10} {r.kind:<7} {r.geomean:6.3f}  {r.low:.3f}-{r.high:.3f}  {r.summary}")
    return "\n".join(lines)
