"""The cost model of one Model: what a decode of b tokens costs at a context depth, and
the plans every method sizes its drafts with.

A `CostModel` is bound once per Model (`Model.costs`): the curve of that model on this
device (`pyaccel.costs`), learnt from use or fully measured, or a given curve (to study
another device). Every method asks it for a plan at the current context depth:

    chain(alpha, depth, limit, draft_cost)   best chain length: acceptance alpha[i] of
                                             position i, each draft token costing
                                             draft_cost target tokens to produce
    tree(path_probs, parents, depth, limit)  best prefix-closed subset of a candidate tree

Each plan reports its expected speedup over plain decoding (`expected_speedup`). Nothing
verifies more tokens than were measured: one token past the curve can cross a CPU kernel
tile and cost far more than the curve extrapolates.

A learnt curve keeps to its evidence the same way (`learnt_evidence`, `conservative_fill`):
it ends at the
largest size timed (or bounded by a prefill), and a size between two timed ones costs the
larger one's time or one more single token per extra token, whichever is less; so a plan
never lands on a size it has no evidence for being cheap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from . import _core
from .costs import (MAX_MEASURED_BATCH, PREFILL, VERIFY, CostSamples, DecodeCosts, bucket_depth, calibrate,
                    cost_file, cost_key, decode_costs, learnt_file, load_decode_costs, measure_decode_costs, save_json,
                    single_token_ratios)

if TYPE_CHECKING:
    from .backend import LlamaBackend

# Plans use the curve of the context depth in steps of this many tokens.
DEPTH_STEP = 128
# A draft-token cost is the median of this many ratios, each timing the draft and the
# target one after the other (least of TOKEN_COST_REPEATS passes each), so that a burst of
# load on a shared machine moves one ratio, not the decision.
TOKEN_COST_ROUNDS = 5
TOKEN_COST_REPEATS = 3
# A learnt curve is rebuilt after this many new samples (a step adds one).
CURVE_REFRESH_SAMPLES = 16
# The output rows' cost is learnt from sizes at least this large: in smaller batches the
# output matmul is bound by reading its weights, and extra rows look nearly free (a small
# batch with every row's logits can cost what it does with one row's), which would make a
# prefill bound optimistic for the larger sizes it is used for.
ROW_COST_MIN_SIZE = 8


@dataclass(frozen=True)
class Evidence:
    """What learnt samples say: single-token seconds by depth, and per size b >= 2 its cost
    relative to one token by depth (timed, or bounded by a prefill)."""

    t1_depths: list[int]
    t1_seconds: list[float]
    relative: dict[int, tuple[list[int], list[float]]] = field(default_factory=dict)

    def t1_at(self, depth: int) -> float:
        return float(np.interp(depth, self.t1_depths, self.t1_seconds))

    def relative_at(self, depth: int) -> list[float]:
        """The conservative curve at `depth` (between evidenced depths interpolated, constant beyond)."""
        rel = {b: float(np.interp(depth, d, r)) for b, (d, r) in self.relative.items()}
        return conservative_fill({1: 1.0, **rel})


def conservative_fill(relative: Mapping[int, float]) -> list[float]:
    """The curve t[b - 1], b = 1..max(relative), from the sizes with evidence (relative[1] = 1):
    any other size costs the next larger evidenced size or the next smaller one plus one
    single token per extra token, whichever is less."""
    sizes = sorted(relative)
    out = []
    for b in range(1, sizes[-1] + 1):
        if b in relative:
            out.append(relative[b])
            continue
        lo = max(a for a in sizes if a < b)
        hi = min(a for a in sizes if a > b)
        out.append(min(relative[hi], relative[lo] + (b - lo)))
    return out


def learnt_evidence(samples: CostSamples, max_batch: int = MAX_MEASURED_BATCH) -> Evidence:
    """Relative costs per size and depth bucket: a size's own timings where it has them;
    elsewhere, above the largest size where the output rows' cost R was learnt (the most per
    row seen there), the least prefill of at least b tokens plus (b - 1) R (a prefill
    computes one output row, a verification b)."""
    ones = sorted((b, c) for (k, n, b) in samples.cells if k == VERIFY and n == 1
                  for c in [samples.cost(VERIFY, 1, b)] if c is not None)
    if not ones:
        raise ValueError("no single-token decode has been timed yet: calibrate first (CostModel.of does)")
    ev = Evidence([bucket_depth(b) for b, _ in ones], [c for _, c in ones])
    points: dict[int, dict[int, float]] = {}
    for (kind, n, bucket) in samples.cells:
        c = samples.cost(kind, n, bucket)
        if kind == VERIFY and 2 <= n <= max_batch and c is not None:
            points.setdefault(n, {})[bucket] = c
    _prefill_bounds(samples, points, max_batch)
    for b, by_bucket in sorted(points.items()):
        buckets = sorted(by_bucket)
        ev.relative[b] = ([bucket_depth(k) for k in buckets],
                          [relative_cost(b, by_bucket[k], ev.t1_at(bucket_depth(k))) for k in buckets])
    return ev


def relative_cost(tokens: int, seconds: float, t1: float) -> float:
    """A decode of `tokens` taking `seconds` relative to one token taking `t1`, kept within
    [1, tokens]: a batch never costs more than decoding its tokens one by one, so a ratio
    above that compares timings taken under different loads (a burst of contention while
    one size was timed and not the other), not the batch."""
    return min(float(tokens), max(1.0, seconds / t1))


def _prefill_bounds(samples: CostSamples, points: dict[int, dict[int, float]], max_batch: int) -> None:
    """Add to `points` (seconds by size and bucket) the prefill bounds where nothing was timed."""
    pairs = [(n, b) for (k, n, b) in samples.cells
             if k == PREFILL and n >= ROW_COST_MIN_SIZE and b in points.get(n, {})]
    if not pairs:
        return
    n_row = max(n for n, _ in pairs)
    row_s = max(max(0.0, (points[n][b] - (samples.cost(PREFILL, n, b) or 0.0)) / (n - 1)) for n, b in pairs)
    prefills: dict[int, dict[int, float]] = {}  # bucket -> tokens -> seconds
    for (kind, n, bucket) in samples.cells:
        c = samples.cost(kind, n, bucket)
        if kind == PREFILL and c is not None:
            prefills.setdefault(bucket, {})[n] = c
    for bucket, by_size in prefills.items():
        least = float("inf")
        for size in range(max(by_size), n_row, -1):  # least prefill of >= size tokens
            least = min(least, by_size.get(size, least))
            if size <= max_batch and bucket not in points.get(size, {}) and least < float("inf"):
                points.setdefault(size, {})[bucket] = least + (size - 1) * row_s


class CostModel:
    """Relative decode costs by batch size and context depth, and draft plans on them."""

    def __init__(self, costs: DecodeCosts | None = None, relative: Sequence[float] | None = None,
                 learnt: CostSamples | None = None) -> None:
        if sum(x is not None for x in (costs, relative, learnt)) != 1:
            raise ValueError("give exactly one of: measured costs, one relative curve, learnt samples")
        self._measured: DecodeCosts | None = costs
        self.learnt: CostSamples | None = learnt
        self._fixed = _core.CostCurve([float(t) for t in relative]) if relative is not None else None
        self._curves: dict[int, "_core.CostCurve"] = {}
        self._evidence: Evidence | None = None
        self._evidence_version = 0
        self._snapshot: DecodeCosts | None = None

    @staticmethod
    def fixed(relative: Sequence[float]) -> "CostModel":
        """One relative curve at every depth: relative[b - 1] = cost of b tokens / cost of 1."""
        return CostModel(relative=relative)

    @staticmethod
    def of(backend: "LlamaBackend", progress: bool = True, remeasure: bool = False) -> "CostModel":
        """The curve of `backend`'s model on this device: the full measurement in the cache
        (or measured now with `remeasure`), else the one learnt from use, calibrated now for
        a few seconds (samples cached on disk, merged across runs)."""
        full = None if remeasure else load_decode_costs(cost_file(cost_key(backend, MAX_MEASURED_BATCH)))
        if full is not None or remeasure:
            return CostModel(full or decode_costs(backend, remeasure=True, progress=progress))
        samples = CostSamples.load(learnt_file(backend))
        calibrate(backend, samples)
        samples.save()
        return CostModel(learnt=samples)

    # ---- curves ------------------------------------------------------------------------------

    @property
    def measured(self) -> DecodeCosts | None:
        """The full measurement; for a learnt model its curve now, behind the depth most of
        its samples come from; None for a fixed curve."""
        if self.learnt is None:
            return self._measured
        ev = self._learnt()
        if self._snapshot is None:
            buckets = [b for (k, n, b) in self.learnt.cells if k == VERIFY]
            depth = bucket_depth(max(set(buckets), key=buckets.count))
            t1 = ev.t1_at(depth)
            self._snapshot = DecodeCosts([t * t1 for t in ev.relative_at(depth)], key="learnt", depth=depth)
        return self._snapshot

    def _learnt(self) -> Evidence:
        """The learnt evidence, rebuilt (and the curves with it) every CURVE_REFRESH_SAMPLES samples."""
        assert self.learnt is not None
        if self._evidence is None or self.learnt.version - self._evidence_version >= CURVE_REFRESH_SAMPLES:
            self._evidence = learnt_evidence(self.learnt)
            self._evidence_version = self.learnt.version
            self._curves.clear()
            self._snapshot = None
        return self._evidence

    def curve(self, depth: int) -> "_core.CostCurve":
        """The relative cost curve behind `depth` cached tokens."""
        if self._fixed is not None:
            return self._fixed
        if self.learnt is not None:
            self._learnt()
        step = max(0, depth) // DEPTH_STEP
        if step not in self._curves:
            self._curves[step] = _core.CostCurve(self.relative_at(step * DEPTH_STEP + DEPTH_STEP // 2))
        return self._curves[step]

    def relative_at(self, depth: int) -> list[float]:
        """The relative curve at exactly `depth` (plans use it in DEPTH_STEP steps)."""
        if self.learnt is not None:
            return self._learnt().relative_at(depth)
        if self._measured is not None:
            return self._measured.relative_at(depth)
        return [float(t) for t in self.curve(depth).times]

    def max_nodes(self, depth: int) -> int:
        """The most draft nodes one verification may hold (the root takes one more slot)."""
        return self.curve(depth).measured - 1

    # ---- plans -------------------------------------------------------------------------------

    def chain(self, alpha: Sequence[float], depth: int, limit: int, draft_cost: float = 0.0) -> "_core.ChainPlan":
        """The chain length (<= limit, <= len(alpha)) with the best expected tokens per cost."""
        n = max(0, min(limit, len(alpha), self.max_nodes(depth)))
        return _core.chain_plan(self.curve(depth), list(alpha)[:n], draft_cost, n)

    def tree(self, path_probs: np.ndarray, parents: np.ndarray, depth: int, limit: int) -> "_core.TreePlan":
        """The subset of a candidate tree (path_probs[i] = P(node i accepted)) with the best
        expected tokens per cost, at most `limit` nodes."""
        n = max(0, min(limit, self.max_nodes(depth)))
        return _core.tree_plan(self.curve(depth), path_probs, parents, n)

    def can_pay(self, depth: int, limit: int, draft_cost: float, margin: float = 0.0) -> bool:
        """Could a chain that is always accepted beat plain decoding here (by `margin`)?"""
        plan = self.chain([1.0] * max(limit, 0), depth, limit, draft_cost)
        return plan.best_len > 0 and plan.expected_speedup > 1.0 + margin

    # ---- the cost of drafting ---------------------------------------------------------------

    def token_s(self, backend: "LlamaBackend") -> float:
        """Least wall time of one single-token decode on `backend` now."""
        return measure_decode_costs(backend, max_batch=1, repeats=TOKEN_COST_REPEATS, progress=False,
                                    deep=False).token_s

    def relative_token_cost(self, target: "LlamaBackend", draft: "LlamaBackend", remeasure: bool = False) -> float:
        """One `draft` token's decode time over one `target` token's: measured once per
        model pair, device and threads (cached on disk beside the cost curves), so the
        decision it feeds is the same from one run to the next."""
        st = draft.path.stat()
        path = cost_file(f"{cost_key(target, 1)}--draft-{draft.path.name}-{st.st_size}-t{draft.n_threads}")
        if path.is_file() and not remeasure:
            try:
                return float(json.loads(path.read_text(encoding="utf-8"))["relative"])
            except (ValueError, KeyError, TypeError):
                pass  # a damaged file is measured again
        ratios = sorted(single_token_ratios(draft, target, TOKEN_COST_ROUNDS, TOKEN_COST_REPEATS))
        relative = ratios[len(ratios) // 2]
        save_json(path, {"relative": relative, "ratios": ratios})
        return relative
