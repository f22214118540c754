"""Measured decode costs of a model on this device, cached on disk.

On a small CPU verifying b tokens costs nearly b times one token; on a GPU almost nothing
more. Every method sizes its drafts from this measured curve (through `_core.chain_plan` /
`_core.tree_plan`), so it drafts where drafting pays and decodes plainly where it does not.

Two sources: a full measurement (`measure_decode_costs`, minutes on a small CPU; `pyaccel
models costs --remeasure`), or, by default, `CostSamples` learnt from use: a calibration of
a few seconds at first use (`calibrate`), then every decode the model does anyway.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import _core
from .backend import LlamaBackend
from .leftovers import remove_dead_temps
from .paths import file_lock
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
# attention over the context makes big batches dearer relative to one token, so a curve
# measured behind an empty cache underprices the verifications of long inputs. Drafts pay
# most on long inputs (editing, RAG), so the curve is measured where they run.
MEASURE_DEPTH = 1024
# A few sizes are measured again behind a short context (SHALLOW_DEPTH) and behind twice
# MEASURE_DEPTH: relative costs change with depth, and not linearly (a size may cost
# relatively less behind a middle depth than behind both a short and a long context). The
# cost at any depth interpolates each
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


def _model_device(backend: LlamaBackend) -> str:
    """Model file, device, thread count, offload, attention kernel and the weights' buffer
    types where pyaccel chose them: what costs depend on."""
    st = backend.path.stat()
    fa = {None: "auto", True: "on", False: "off"}[backend.config.flash_attn]
    placed = f"-w{backend.placement.tag}" if backend.placement.tag else ""
    return (f"{backend.path.name}-{st.st_size}-{platform.machine()}-{_cpu_name()}-gpu{backend.config.n_gpu_layers}"
            f"-t{backend.n_threads}-fa{fa}{placed}")


def _file_safe(raw: str) -> str:
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in raw)


def cost_key(backend: LlamaBackend, max_batch: int) -> str:
    """One full measurement per model and device (`_model_device`), batch and depths."""
    return _file_safe(f"{_model_device(backend)}-b{max_batch}-d{measure_depth(backend)}"
                      + "".join(f"-{d}" for d in sweep_depths(backend, max_batch)))


def measure_decode_costs(backend: LlamaBackend, max_batch: int = MAX_MEASURED_BATCH,
                         repeats: int = MEASURE_REPEATS, progress: bool = True, deep: bool = True) -> DecodeCosts:
    """Time one decode of b = 1..max_batch tokens placed after whatever sequence 0 holds,
    padded with filler tokens to `measure_depth(backend)`; with `deep`, time SWEEP_SIZES
    again at each of `sweep_depths(backend)`. The filler is removed afterwards."""
    origin = backend.kv_pos_max(0) + 1
    depth = _filler_depth(backend, origin, max_batch)
    max_batch = min(max_batch, backend.max_batch, backend.n_ctx - origin - depth - 2)
    if max_batch < 1:
        raise ValueError("the context is too full to measure decode costs: use a larger n_ctx (--n-ctx)")
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


def single_token_ratios(numerator: LlamaBackend, denominator: LlamaBackend, rounds: int, repeats: int,
                        progress: bool = True) -> list[float]:
    """`rounds` ratios of one single-token decode's least wall time on `numerator` over one
    on `denominator`, each at its `measure_depth` (as `measure_decode_costs` would time it).
    Each model is filled to its depth once and the two are timed in alternation, so drift
    on the host hits both alike. The filler is removed afterwards."""
    bar = Progress(f"measuring {numerator.path.name} against {denominator.path.name}", rounds,
                   unit="rounds") if progress else None
    origins = [b.kv_pos_max(0) + 1 for b in (numerator, denominator)]
    try:
        starts = []
        for b, origin in zip((numerator, denominator), origins):
            depth = _filler_depth(b, origin, 1)
            if depth:
                b.prefill(_filler(depth, origin, b.n_vocab), start_pos=origin)
            starts.append(origin + depth)
        ratios = []
        for _ in range(rounds):
            num = _sweep(numerator, starts[0], [1], repeats, None)[0]
            ratios.append(num / _sweep(denominator, starts[1], [1], repeats, None)[0])
            if bar:
                bar.update(1)
        return ratios
    finally:
        if bar:
            bar.close()
        for b, origin in zip((numerator, denominator), origins):
            b.kv_remove(0, origin, -1)


def _filler_depth(backend: LlamaBackend, origin: int, max_batch: int) -> int:
    """Filler tokens to place after `origin` so that decodes of up to `max_batch` tokens are
    timed at `measure_depth(backend)`, leaving them room in the context."""
    return max(0, min(measure_depth(backend) - origin, backend.n_ctx - origin - max_batch - 2))


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
    remove_dead_temps(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def load_decode_costs(path: Path) -> DecodeCosts | None:
    """A full measurement saved at `path`, or None (absent, unreadable or damaged, which a
    warning tells). Damaged includes numbers no measurement gives: a time that is not a
    positive finite number, or a sweep whose lengths do not match its sizes."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        costs = DecodeCosts(seconds=[float(s) for s in data["seconds"]], key=path.stem, depth=int(data["depth"]),
                            sweep_depths=[int(d) for d in data["sweep_depths"]],
                            sweep_sizes=[int(b) for b in data["sweep_sizes"]],
                            sweep_seconds=[[float(s) for s in row] for row in data["sweep_seconds"]])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        _damaged(path, "decode cost measurement", exc, "`pyaccel models costs --remeasure` measures it again")
        return None
    if not _plausible(costs):
        _damaged(path, "decode cost measurement", "times no measurement gives",
                 "`pyaccel models costs --remeasure` measures it again")
        return None
    return costs


def _damaged(path: Path, what: str, why: object, then: str) -> None:
    """Warn that the file at `path` is dropped (its content is learnt or measured again)."""
    warnings.warn(f"pyaccel: dropping {path}, the {what} saved there, which cannot be read or is damaged "
                  f"({why}): {then}", stacklevel=3)


def _plausible(costs: DecodeCosts) -> bool:
    times = costs.seconds + [t for row in costs.sweep_seconds for t in row]
    return (bool(costs.seconds) and all(math.isfinite(t) and t > 0 for t in times)
            and len(costs.sweep_seconds) == len(costs.sweep_depths)
            and all(len(row) == len(costs.sweep_sizes) for row in costs.sweep_seconds)
            and all(1 <= b <= len(costs.seconds) for b in costs.sweep_sizes))


def decode_costs(backend: LlamaBackend, *, max_batch: int = MAX_MEASURED_BATCH, remeasure: bool = False,
                 progress: bool = True) -> DecodeCosts:
    """The cached full curve for this model and device, measured when absent (or when asked)."""
    path = cost_file(cost_key(backend, max_batch))
    costs = None if remeasure else load_decode_costs(path)
    if costs is None:
        costs = measure_decode_costs(backend, max_batch=max_batch, progress=progress)
        save_json(path, asdict(costs))
    return costs


# ---- learnt from use ----------------------------------------------------------------------
#
# Without a full measurement in the cache, the curve is learnt from the decodes a model does
# anyway: each decode-loop step is a sample of (tokens, depth) with every row's logits (a
# verification), each prefill one of a batch that needs only its last row's logits. A
# calibration of a few seconds at first use times single tokens and the smallest sizes; each
# later first use calibrates the sizes with the fewest samples, so the curve grows run by run.

VERIFY, PREFILL = "verify", "prefill"
# Recent samples kept per (kind, tokens, depth bucket): enough for a low quantile to see
# past bursts of load; the most recent, so a machine that changed is relearnt.
KEEP_SAMPLES = 24
# A cell's cost is this quantile of its samples. Load on a shared machine only adds time,
# so a low quantile is the device's own cost; the minimum would drift down as samples grow.
SAMPLE_QUANTILE = 0.25
# Depth buckets double in width: [0, 128), [128, 256), [256, 512), ...
BUCKET_BASE = 128
# A prefill bounds verifications of at most its own size (the curve stops at
# MAX_MEASURED_BATCH); longer ones bound nothing tighter and are not kept.
MAX_PREFILL_SAMPLE = 2 * MAX_MEASURED_BATCH
# Wall time of one calibration, and the rounds over its sizes (round by round, so a burst
# of load costs one sample of each size, not every sample of one size).
CALIBRATION_S = 3.0
CALIBRATION_ROUNDS = 2
# Learnt samples are written at most this often (and when the Model closes).
SAVE_EVERY_S = 10.0
LEARNT_FORMAT = 1

Cell = tuple[str, int, int]  # kind, tokens in the decode, depth bucket


def depth_bucket(depth: int) -> int:
    return 0 if depth < BUCKET_BASE else int(math.log2(depth / BUCKET_BASE)) + 1


def bucket_depth(bucket: int) -> int:
    """The depth a bucket's samples stand for (the middle of its range)."""
    return BUCKET_BASE // 2 if bucket == 0 else BUCKET_BASE * 3 * 2 ** (bucket - 1) // 2


def low_quantile(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[int(SAMPLE_QUANTILE * (len(ordered) - 1))]


class CostSamples:
    """Decode wall times seen on one model and device by (kind, tokens, depth bucket), the
    most recent KEEP_SAMPLES of each; saved to `path` merged with what other processes saved.
    It is the decode loop's recorder (`TargetCache.recorder`)."""

    def __init__(self, path: Path | None = None, cells: dict[Cell, list[float]] | None = None) -> None:
        self.path = path
        self.cells: dict[Cell, list[float]] = {c: list(v)[-KEEP_SAMPLES:] for c, v in (cells or {}).items()}
        self.version = 0  # counts samples added; curves built from these note it
        self._unsaved: dict[Cell, list[float]] = {}
        self._costs: dict[Cell, float] = {}
        self._saved_at = time.monotonic()

    def add(self, kind: str, tokens: int, depth: int, seconds: float) -> None:
        if tokens < 1 or not (seconds > 0 and math.isfinite(seconds)):
            return
        if kind == PREFILL and tokens > MAX_PREFILL_SAMPLE:
            return
        cell = (kind, int(tokens), depth_bucket(max(0, depth)))
        kept = self.cells.setdefault(cell, [])
        kept.append(float(seconds))
        del kept[:-KEEP_SAMPLES]
        self._unsaved.setdefault(cell, []).append(float(seconds))
        self._costs.pop(cell, None)
        self.version += 1

    def cost(self, kind: str, tokens: int, bucket: int) -> float | None:
        """The cell's low-quantile wall time, or None without samples."""
        cell = (kind, tokens, bucket)
        if cell not in self._costs:
            kept = self.cells.get(cell)
            if not kept:
                return None
            self._costs[cell] = low_quantile(kept)
        return self._costs[cell]

    def count(self, kind: str, tokens: int, bucket: int) -> int:
        return len(self.cells.get((kind, tokens, bucket), ()))

    # ---- the recorder the decode loop calls ---------------------------------------------------

    def on_decode(self, tokens: int, depth: int, seconds: float) -> None:
        self.add(VERIFY, tokens, depth, seconds)

    def on_prefill(self, tokens: int, depth: int, seconds: float) -> None:
        self.add(PREFILL, tokens, depth, seconds)

    def on_generation_end(self) -> None:
        if self._unsaved and time.monotonic() - self._saved_at >= SAVE_EVERY_S:
            self.save()

    # ---- persistence ----------------------------------------------------------------------------

    def save(self) -> None:
        """Merge this process's new samples into the file (another process may have added
        its own since we read it) and adopt the merged cells."""
        if self.path is None:
            return
        try:
            with file_lock(self.path):  # another process's read-merge-write waits: none is lost
                merged = load_cells(self.path)
                for cell, new in self._unsaved.items():
                    merged[cell] = (merged.get(cell, []) + new)[-KEEP_SAMPLES:]
                for cell, kept in self.cells.items():
                    merged.setdefault(cell, kept)
                save_json(self.path, {"format": LEARNT_FORMAT,
                                      "cells": [[k, n, b, [float(f"{s:.6g}") for s in v]]
                                                for (k, n, b), v in sorted(merged.items())]})
        except OSError as exc:
            warnings.warn(f"pyaccel could not save learnt decode costs to {self.path} ({exc}); they are relearnt "
                          "next run: set PYACCEL_HOME to a writable folder", stacklevel=2)
            self.path = None
        self.cells, self._unsaved, self._costs = merged, {}, {}
        self._saved_at = time.monotonic()
        self.version += 1

    @staticmethod
    def load(path: Path) -> "CostSamples":
        return CostSamples(path, load_cells(path))


def load_cells(path: Path) -> dict[Cell, list[float]]:
    """The samples saved at `path`; none when absent or damaged (they are relearnt; a
    warning tells of a damaged file)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != LEARNT_FORMAT:
            return {}
        cells = {(str(k), int(n), int(b)): [float(s) for s in v] for k, n, b, v in data["cells"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        _damaged(path, "learnt decode costs", exc, "they are learnt again and saved over it")
        return {}
    return {c: [s for s in v if s > 0 and math.isfinite(s)][-KEEP_SAMPLES:] for c, v in cells.items()
            if c[0] in (VERIFY, PREFILL) and c[1] >= 1 and c[2] >= 0}


def learnt_file(backend: LlamaBackend) -> Path:
    """One file per model and device (`_model_device`), not per context size: samples carry
    their own depth."""
    return cache_dir() / "costs" / f"{_file_safe(_model_device(backend))}.learnt.json"


def calibrate(backend: LlamaBackend, samples: CostSamples, budget_s: float = CALIBRATION_S,
              max_batch: int = MAX_MEASURED_BATCH) -> list[int]:
    """Time decodes behind what sequence 0 holds for about `budget_s` seconds, into `samples`:
    one SWEEP_SIZES size after another, those with the fewest samples first (smaller first)
    whose expected time fits what is left, CALIBRATION_ROUNDS times each, every time next to
    a single token (so both see the same load), and once with only its last row's logits (as
    a prefill: it tells what the output rows cost). Returns the sizes timed."""
    origin = backend.kv_pos_max(0) + 1
    max_batch = min(max_batch, backend.max_batch, backend.n_ctx - origin - 2)
    if max_batch < 1:
        raise ValueError("the context is too full to calibrate decode costs: use a larger n_ctx (--n-ctx)")
    tokens = (np.arange(max_batch, dtype=np.int32) * 37 + 1000) % backend.n_vocab
    timed = [1]
    try:
        # Warm-up: a context's first decode pages the weights in and allocates buffers;
        # plain decoding pays that as well (in its prefill), so it is not in the budget.
        _timed(backend, tokens[:1], origin, all_rows=True)
        t0 = time.perf_counter()
        t1 = _timed(backend, tokens[:1], origin, all_rows=True)
        samples.add(VERIFY, 1, origin, t1)
        while True:
            b = _next_size(samples, depth_bucket(origin), max_batch, t1, budget_s - (time.perf_counter() - t0), timed)
            if b is None:
                return timed
            for _ in range(CALIBRATION_ROUNDS):
                samples.add(VERIFY, 1, origin, _timed(backend, tokens[:1], origin, all_rows=True))
                samples.add(VERIFY, b, origin, _timed(backend, tokens[:b], origin, all_rows=True))
            samples.add(PREFILL, b, origin, _timed(backend, tokens[:b], origin, all_rows=False))
            timed.append(b)
    finally:
        backend.kv_remove(0, origin, -1)


def _next_size(samples: CostSamples, bucket: int, max_batch: int, t1: float, budget_s: float,
               done: list[int]) -> int | None:
    """The size not in `done` with the fewest samples (the smaller first) whose timings fit."""
    for b in sorted((b for b in SWEEP_SIZES if 1 < b <= max_batch and b not in done),
                    key=lambda b: (samples.count(VERIFY, b, bucket), b)):
        expected = _expected_s(samples, bucket, b, t1)
        if CALIBRATION_ROUNDS * (t1 + expected) + expected <= budget_s:
            return b
    return None


def _expected_s(samples: CostSamples, bucket: int, b: int, t1: float) -> float:
    """What a decode of b tokens should take now: its own samples, else the largest smaller
    size's scaled linearly (costs grow slower than that), else b single tokens."""
    one = samples.cost(VERIFY, 1, bucket)
    for a in range(b, 0, -1):
        known = samples.cost(VERIFY, a, bucket)
        if known is not None and one is not None:
            return known / one * t1 * b / a
    return b * t1


def _timed(backend: LlamaBackend, tokens: np.ndarray, start: int, all_rows: bool) -> float:
    """Wall time of one decode of `tokens` at `start` (reading the logits waits for a GPU)."""
    b = len(tokens)
    t = time.perf_counter()
    backend.decode(tokens, np.arange(start, start + b), logits=np.ones(b, dtype=np.int8) if all_rows else None)
    backend.logits_rows()
    seconds = time.perf_counter() - t
    backend.kv_remove(0, start, -1)
    return seconds
