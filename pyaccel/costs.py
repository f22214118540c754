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
from dataclasses import asdict, dataclass
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
# Tokens already in the cache while measuring (at most half the context). On a CPU the
# attention over the context makes big batches dearer: measured on Qwen2.5-Coder-1.5B, a
# 32-token decode cost 11.5 single-token decodes with an empty cache but 14.9 after 1000
# tokens, and a real 48-token verification step at ~900 tokens of context took 1.4x what a
# curve measured on an empty cache predicted. Drafts pay most on long inputs (editing,
# RAG), so the curve is measured where they run.
MEASURE_DEPTH = 1024


def measure_depth(backend: LlamaBackend) -> int:
    """Context depth at which this backend's curve is measured."""
    return min(MEASURE_DEPTH, backend.n_ctx // 2)


@dataclass(frozen=True)
class DecodeCosts:
    """seconds[b - 1]: wall time of one decode of b tokens."""

    seconds: list[float]
    key: str = ""

    def relative(self) -> list[float]:
        return [s / self.seconds[0] for s in self.seconds]

    def curve(self) -> "_core.CostCurve":
        return _core.CostCurve(self.relative())

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
           f"-d{measure_depth(backend)}")
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in raw)


def measure_decode_costs(backend: LlamaBackend, max_batch: int = MAX_MEASURED_BATCH,
                         repeats: int = MEASURE_REPEATS, progress: bool = True) -> DecodeCosts:
    """Time one decode of b = 1..max_batch tokens placed after whatever sequence 0 holds,
    padded with filler tokens to `measure_depth(backend)` (removed afterwards)."""
    origin = backend.kv_pos_max(0) + 1
    depth = max(0, min(measure_depth(backend) - origin, backend.n_ctx - origin - max_batch - 2))
    max_batch = min(max_batch, backend.max_batch, backend.n_ctx - origin - depth - 2)
    if max_batch < 1:
        raise ValueError("the context is too full to measure decode costs: use a larger n_ctx")
    try:
        filler = (np.arange(depth, dtype=np.int32) * 7 + 100) % backend.n_vocab
        backend.prefill(filler, start_pos=origin)
        return _sweep(backend, origin + depth, max_batch, repeats, progress)
    finally:
        backend.kv_remove(0, origin, -1)


def _sweep(backend: LlamaBackend, start: int, max_batch: int, repeats: int, progress: bool) -> DecodeCosts:
    tokens = (np.arange(max_batch, dtype=np.int32) * 37 + 1000) % backend.n_vocab
    bar = Progress(f"measuring decode costs of {backend.path.name}", repeats, unit="passes") if progress else None
    seconds = [float("inf")] * max_batch
    for b in (1, max_batch):  # warm-up: the first decodes allocate buffers
        backend.decode(tokens[:b], np.arange(start, start + b))
        backend.kv_remove(0, start, -1)
    for _ in range(repeats):
        for b in range(1, max_batch + 1):
            t0 = time.perf_counter()
            backend.decode(tokens[:b], np.arange(start, start + b), logits=np.ones(b, dtype=np.int8))
            seconds[b - 1] = min(seconds[b - 1], time.perf_counter() - t0)
            backend.kv_remove(0, start, -1)
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    return DecodeCosts(seconds, cost_key(backend, max_batch))


def _cost_file(key: str) -> Path:
    return cache_dir() / "costs" / f"{key}.json"


def decode_costs(backend: LlamaBackend, *, max_batch: int = MAX_MEASURED_BATCH, remeasure: bool = False,
                 progress: bool = True) -> DecodeCosts:
    """The cached curve for this model and device, measured on first use (or when asked)."""
    key = cost_key(backend, max_batch)
    path = _cost_file(key)
    if path.is_file() and not remeasure:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return DecodeCosts(seconds=[float(s) for s in data["seconds"]], key=key)
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache file is measured again
    costs = measure_decode_costs(backend, max_batch=max_batch, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(costs), indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return costs
