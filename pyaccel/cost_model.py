"""The cost model of one Model: what a decode of b tokens costs at a context depth, and
the plans every method sizes its drafts with.

A `CostModel` is bound once per Model (`Model.costs`): the measured curve of that model
on this device (`pyaccel.costs`), or a given curve (to study another device). Every
method asks it for a plan at the current context depth:

    chain(alpha, depth, limit, draft_cost)   best chain length: acceptance alpha[i] of
                                             position i, each draft token costing
                                             draft_cost target tokens to produce
    tree(path_probs, parents, depth, limit)  best prefix-closed subset of a candidate tree

Each plan reports its expected speedup over plain decoding (`expected_speedup`). Nothing
verifies more tokens than were measured: one token past the curve can cross a CPU kernel
tile (a 65-token verification measured 1.15x what the curve extrapolated from 64).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Sequence

import numpy as np

from . import _core
from .costs import DecodeCosts, cost_file, cost_key, decode_costs, measure_decode_costs, save_json

if TYPE_CHECKING:
    from .backend import LlamaBackend

# Plans use the curve of the context depth in steps of this many tokens.
DEPTH_STEP = 128
# A draft-token cost is the median of this many ratios, each timing the draft and the
# target one after the other (least of TOKEN_COST_REPEATS passes each), so that a burst of
# load on a shared machine moves one ratio, not the decision.
TOKEN_COST_ROUNDS = 5
TOKEN_COST_REPEATS = 3


class CostModel:
    """Relative decode costs by batch size and context depth, and draft plans on them."""

    def __init__(self, costs: DecodeCosts | None = None, relative: Sequence[float] | None = None) -> None:
        if (costs is None) == (relative is None):
            raise ValueError("give either measured costs or one relative curve")
        self.measured: DecodeCosts | None = costs
        self._fixed = _core.CostCurve([float(t) for t in relative]) if relative is not None else None
        self._curves: dict[int, "_core.CostCurve"] = {}

    @staticmethod
    def fixed(relative: Sequence[float]) -> "CostModel":
        """One relative curve at every depth: relative[b - 1] = cost of b tokens / cost of 1."""
        return CostModel(relative=relative)

    @staticmethod
    def of(backend: "LlamaBackend", progress: bool = True, remeasure: bool = False) -> "CostModel":
        """The measured curve of `backend`'s model on this device (cached on disk)."""
        return CostModel(decode_costs(backend, progress=progress, remeasure=remeasure))

    # ---- curves ------------------------------------------------------------------------------

    def curve(self, depth: int) -> "_core.CostCurve":
        """The relative cost curve behind `depth` cached tokens."""
        if self._fixed is not None:
            return self._fixed
        assert self.measured is not None
        step = max(0, depth) // DEPTH_STEP
        if step not in self._curves:
            self._curves[step] = _core.CostCurve(self.measured.relative_at(step * DEPTH_STEP + DEPTH_STEP // 2))
        return self._curves[step]

    def relative_at(self, depth: int) -> list[float]:
        """The relative curve at exactly `depth` (plans use it in DEPTH_STEP steps)."""
        if self.measured is not None:
            return self.measured.relative_at(depth)
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
        ratios = sorted(self.token_s(draft) / self.token_s(target) for _ in range(TOKEN_COST_ROUNDS))
        relative = ratios[len(ratios) // 2]
        save_json(path, {"relative": relative, "ratios": ratios})
        return relative
