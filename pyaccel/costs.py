"""Measured decode costs of a model on this device, cached on disk.

On a small CPU verifying b tokens costs nearly b times one token; on a GPU almost nothing
more. Every method sizes its drafts from this measured curve (through `_core.chain_plan` /
`_core.tree_plan`), so it drafts where drafting pays and decodes plainly where it does not.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import _core
from .backend import LlamaBackend
from .progress import Progress
from .registry import cache_dir

# Largest verification batch measured; drafts never exceed it.
MAX_MEASURED_BATCH = 64
# Passes over all sizes; each size keeps its minimum (interference only adds time, and a
# pass-by-pass sweep spreads a burst of interference over many sizes, not one size).
MEASURE_REPEATS = 3
# Each pass times a batch of b tokens ceil(SMALL_BATCH_SAMPLES / b) times: every cost is
# relative to one token's, so the cheap small sizes get the most samples.
SMALL_BATCH_SAMPLES = 8
# Tokens already in the cache while measuring (at most half the context). On a CPU the
# attention over the context makes big batches dearer: measured on Qwen2.5-Coder-1.5B, a
# 32-token decode cost 11.5 single-token decodes with an empty cache but 14.9 after 1000
# tokens, and a real 48-token verification step at ~900 tokens of context took 1.4x what a
# curve measured on an empty cache predicted. Drafts pay most on long inputs (editing,
# RAG), so the curve is measured where they run.
MEASURE_DEPTH = 1024
# A few sizes are measured again behind a short context (SHALLOW_DEPTH) and behind twice
# MEASURE_DEPTH: relative costs change with depth, and not linearly (on this project's CPU
# 64 tokens cost 24.8 single-token decodes behind 128 tokens, 23.1 behind 1024 and 27.6
# behind 2048; 2 tokens 1.81, 1.64 and 1.94). The cost at any depth interpolates each
# size's difference from the full curve between the measured depths (constant beyond).
SWEEP_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
SHALLOW_DEPTH = 128


def measure_depth(backend: LlamaBackend) -> int:
    """Context depth at which this backend's full curve is measured."""
    return min(MEASURE_DEPTH, backend.n_ctx // 2)


def sweep_depths(backend: LlamaBackend, max_batch: int = MAX_MEASURED_BATCH) -> list[int]:
    """Context depths of the extra sweeps over SWEEP_SIZES (those the context has room for)."""
    d0 = measure_depth(backend)
    deep = min(2 * d0, backend.n_ctx - max_batch - 2)
    return [d for d in (SHALLOW_DEPTH, deep) if d != d0 and 0 < d and (d < d0 or d - d0 >= max_batch)]


@dataclass(frozen=True)
class DecodeCosts:
    """seconds[b - 1]: wall time of one decode of b tokens behind `depth` cached tokens;
    sweep_seconds[k][i]: that of sweep_sizes[i] tokens behind sweep_depths[k] (none: one
    curve for every depth)."""

    seconds: list[float]
    key: str = ""
    depth: int = 0
    sweep_depths: list[int] = field(default_factory=list)
    sweep_sizes: list[int] = field(default_factory=list)
    sweep_seconds: list[list[float]] = field(default_factory=list)

    def relative(self) -> list[float]:
        return [s / self.seconds[0] for s in self.seconds]

    def curve(self) -> "_core.CostCurve":
        return _core.CostCurve(self.relative())

    def seconds_at(self, depth: int) -> list[float]:
        """The curve behind `depth` cached tokens (the full one without sweeps)."""
        base = np.asarray(self.seconds)
        if not self.sweep_depths:
            return [float(x) for x in base]
        b = np.arange(1, base.size + 1)
        sizes = np.asarray(self.sweep_sizes)
        points = sorted([(self.depth, np.zeros(base.size))] +
                        [(d, np.interp(b, sizes, np.asarray(t) - base[sizes - 1]))
                         for d, t in zip(self.sweep_depths, self.sweep_seconds)], key=lambda p: p[0])
        depths = [p[0] for p in points]
        k = int(np.clip(np.searchsorted(depths, depth) - 1, 0, len(points) - 2))
        w = float(np.clip((depth - depths[k]) / (depths[k + 1] - depths[k]), 0.0, 1.0))
        delta = (1 - w) * points[k][1] + w * points[k + 1][1]
        return [float(x) for x in np.maximum(base + delta, 0.25 * base)]

    def relative_at(self, depth: int) -> list[float]:
        s = self.seconds_at(depth)
        return [x / s[0] for x in s]

    @property
    def token_s(self) -> float:
        return self.seconds[0]


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cost_key(backend: LlamaBackend, max_batch: int) -> str:
    """One measurement per model file, device, thread count, offload and attention kernel."""
    st = backend.path.stat()
    device = f"{platform.machine()}-{_cpu_name()}-gpu{backend.config.n_gpu_layers}"
    fa = {None: "auto", True: "on", False: "off"}[backend.config.flash_attn]
    raw = (f"{backend.path.name}-{st.st_size}-{device}-t{backend.n_threads}-fa{fa}-b{max_batch}"
           f"-d{measure_depth(backend)}" + "".join(f"-{d}" for d in sweep_depths(backend, max_batch)))
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in raw)


def measure_decode_costs(backend: LlamaBackend, max_batch: int = MAX_MEASURED_BATCH,
                         repeats: int = MEASURE_REPEATS, progress: bool = True, deep: bool = True) -> DecodeCosts:
    """Time one decode of b = 1..max_batch tokens placed after whatever sequence 0 holds,
    padded with filler tokens to `measure_depth(backend)`; with `deep`, time SWEEP_SIZES
    again at each of `sweep_depths(backend)`. The filler is removed afterwards."""
    origin = backend.kv_pos_max(0) + 1
    depth = max(0, min(measure_depth(backend) - origin, backend.n_ctx - origin - max_batch - 2))
    max_batch = min(max_batch, backend.max_batch, backend.n_ctx - origin - depth - 2)
    if max_batch < 1:
        raise ValueError("the context is too full to measure decode costs: use a larger n_ctx")
    sizes = [b for b in SWEEP_SIZES if b <= max_batch]
    extra = [d for d in sweep_depths(backend, max_batch) if d > origin] if deep else []
    bar = Progress(f"measuring decode costs of {backend.path.name}", repeats * (1 + len(extra)),
                   unit="passes") if progress else None
    filled, seconds, sweeps = origin, [0.0], {}
    try:
        for d in sorted(extra + [origin + depth]):  # shallow to deep, filling as it goes
            backend.prefill(_filler(d - filled, filled, backend.n_vocab), start_pos=filled)
            filled = d
            if d == origin + depth:
                seconds = _sweep(backend, d, list(range(1, max_batch + 1)), repeats, bar)
            else:
                sweeps[d] = _sweep(backend, d, sizes, repeats, bar)
        return DecodeCosts(seconds, cost_key(backend, max_batch), origin + depth, list(sweeps),
                           sizes if sweeps else [], list(sweeps.values()))
    finally:
        if bar:
            bar.close()
        backend.kv_remove(0, origin, -1)


def _filler(n: int, offset: int, n_vocab: int) -> np.ndarray:
    return ((np.arange(offset, offset + n, dtype=np.int64) * 7 + 100) % n_vocab).astype(np.int32)


def _sweep(backend: LlamaBackend, start: int, sizes: list[int], repeats: int, bar: Progress | None) -> list[float]:
    """Least wall time of one decode of each size at `start` over `repeats` passes."""
    tokens = (np.arange(max(sizes), dtype=np.int32) * 37 + 1000) % backend.n_vocab
    seconds = [float("inf")] * len(sizes)
    for b in (sizes[0], sizes[-1]):  # warm-up: the first decodes allocate buffers
        backend.decode(tokens[:b], np.arange(start, start + b))
        backend.kv_remove(0, start, -1)
    for _ in range(repeats):
        for i, b in enumerate(sizes):
            for _ in range(-(-SMALL_BATCH_SAMPLES // b)):  # small batches are cheap: sample them more
                t0 = time.perf_counter()
                backend.decode(tokens[:b], np.arange(start, start + b), logits=np.ones(b, dtype=np.int8))
                seconds[i] = min(seconds[i], time.perf_counter() - t0)
                backend.kv_remove(0, start, -1)
        if bar:
            bar.update(1)
    return seconds


def cost_file(key: str) -> Path:
    return cache_dir() / "costs" / f"{key}.json"


def save_json(path: Path, data: object) -> None:
    """Write atomically: a concurrent reader sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def decode_costs(backend: LlamaBackend, *, max_batch: int = MAX_MEASURED_BATCH, remeasure: bool = False,
                 progress: bool = True) -> DecodeCosts:
    """The cached curve for this model and device, measured on first use (or when asked)."""
    key = cost_key(backend, max_batch)
    path = cost_file(key)
    if path.is_file() and not remeasure:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return DecodeCosts(seconds=[float(s) for s in data["seconds"]], key=key, depth=int(data["depth"]),
                               sweep_depths=[int(d) for d in data["sweep_depths"]],
                               sweep_sizes=[int(b) for b in data["sweep_sizes"]],
                               sweep_seconds=[[float(s) for s in row] for row in data["sweep_seconds"]])
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache file is measured again
    costs = measure_decode_costs(backend, max_batch=max_batch, progress=progress)
    save_json(path, asdict(costs))
    return costs
