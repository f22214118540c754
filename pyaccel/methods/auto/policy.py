"""What `auto` runs and verifies: the tuning knobs and the decisions made from the cost model.

    draft_may_pay   whether the draft model is worth loading on this device at all
    pay_threshold   the estimate some node must reach for anything to pay (before may_pay)
    may_pay         whether any tree of this step's candidates could pay (before merging)
    plan_tree       the subset of the merged tree worth verifying this step
    draft_runs      whether this step's draft-model run is expected to beat the free tree
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ... import _core
from ...backend import VocabularyFile
from ...cost_model import CostModel
from ...errors import ModelNotFoundError
from ...registry import resolve_model
from ..draft import check_draft_vocabulary
from ..lookup.tuning import LookupTuning
from .calibration import CalibrationTuning
from .merge import MergedTree

if TYPE_CHECKING:
    from ...model import Model


@dataclass(frozen=True)
class AutoTuning:
    """The knobs of `auto`."""

    # The draft-model gate assumes a draft as good as same-family drafts get (draft_alpha
    # per token) at the least it can cost (its file size over the target's: a single-token
    # decode reads every weight once); if even that cannot beat plain decoding by
    # draft_margin at any depth checked, the draft model is never loaded.
    draft_alpha: float = 0.8
    draft_margin: float = 0.05
    draft_max: int = 16  # the deepest draft-model chain
    lookahead_ngram: int = 5  # the pool's n-gram length
    lookahead_guesses: int = 7  # the pool's n-grams verified per pass at most
    # Steps between the times a proposer whose bound says it cannot pay (the pool) is
    # asked anyway, so that it keeps learning.
    probe_every: int = 16
    # A step drafts only if its plan expects to beat plain decoding by this much: a plan is
    # the best of many subsets of noisy estimates, so its own estimate errs high, and the
    # time the cost curve leaves out (building, merging and verifying the tree) is paid
    # per step.
    plan_margin: float = 0.10
    calibration: CalibrationTuning = field(default_factory=CalibrationTuning)  # rescaling by what verification found
    prompt_lookup: LookupTuning = field(default_factory=LookupTuning)  # auto's prompt lookup (method "lookup"'s knobs)

    def validate(self) -> None:
        self.calibration.validate()
        self.prompt_lookup.validate()  # also where auto runs without prompt lookup
        if not 0.0 < self.draft_alpha < 1.0:
            raise ValueError(f"draft_alpha must be in (0, 1), got {self.draft_alpha}")
        for name in ("draft_max", "lookahead_guesses", "probe_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.plan_margin < 1.0:
            raise ValueError(f"plan_margin must be in [0, 1), got {self.plan_margin}")
        if self.lookahead_ngram < 3:
            raise ValueError(f"lookahead_ngram must be >= 3, got {self.lookahead_ngram}")


def local_draft_path(target: "Model", draft: object) -> Path | None:
    """The draft model's file if it is on this machine (never pulled: `auto` must not start
    a download); `draft` is a Model, a name or a path, None for the target's registry pair.
    A draft the caller named that is not here is an error (ModelNotFoundError, saying how
    to get it); the registry pair missing is not."""
    from ...model import Model

    if isinstance(draft, Model):
        return draft.path
    named = draft is not None
    if draft is None:
        spec = target.registry_spec
        if spec is None or spec.draft is None:
            return None
        draft = spec.draft
    if not isinstance(draft, (str, os.PathLike)):
        raise TypeError(f"auto's draft must be a Model, a registry name or a .gguf path, got {type(draft).__name__}")
    try:
        return resolve_model(draft, pull_missing=False, progress=False)
    except ModelNotFoundError:
        if named:
            raise
        return None


def check_named_draft(target: "Model", draft: object, path: Path) -> None:
    """IncompatibleModelsError unless the draft the caller named (a Model, or the file at
    `path`) shares the target's tokenizer: checked on its vocabulary alone (well under a
    second, no weights read), whether or not this device will ever load it."""
    from ...model import Model

    if isinstance(draft, Model):
        check_draft_vocabulary(target, draft.backend, draft.name)
        return
    with VocabularyFile(path, verbose=target.backend.config.verbose) as vocabulary:
        check_draft_vocabulary(target, vocabulary, path.name)


def draft_cost_floor(draft: Path, target: Path) -> float:
    """The least a draft token can cost in target tokens: the ratio of the weights read."""
    return draft.stat().st_size / max(1, target.stat().st_size)


def draft_may_pay(costs: CostModel, depths: list[int], cost_floor: float, tuning: AutoTuning) -> bool:
    """Could a good draft (tuning.draft_alpha per token, at `cost_floor`) beat plain
    decoding by the margin at any of `depths`? A chain plan each: cheap, nothing loaded."""
    alpha = [tuning.draft_alpha] * tuning.draft_max
    for depth in depths:
        plan = costs.chain(alpha, depth, tuning.draft_max, cost_floor)
        if plan.best_len > 0 and plan.expected_speedup > 1.0 + tuning.draft_margin:
            return True
    return False


def may_pay(pass_cost: np.ndarray, probs: np.ndarray, limit: int, margin: float = 0.0) -> bool:
    """Could any `limit` or fewer of these candidate nodes (calibrated P(accepted) each,
    before merging) beat plain decoding by `margin` on a curve whose `pass_costs` are
    `pass_cost`? An upper bound on every tree `plan_tree` could pick from them: it takes
    the n likeliest nodes whatever their parents, and merging only ever takes the larger
    of two estimates of one node. Most steps on text unlike the context end here, without
    building the tree."""
    cost = pass_cost[:max(0, min(len(probs), limit))]
    if not len(cost):
        return False
    best = np.sort(np.asarray(probs, dtype=np.float64))[::-1][:len(cost)]
    expected = 1.0 + np.cumsum(best)
    return bool(np.any(expected >= (1.0 + margin) * cost))


def pay_threshold(pass_cost: np.ndarray, limit: int, margin: float = 0.0) -> float:
    """The estimate below which no node can help: if every candidate node's P(accepted) is
    under it, no `limit` or fewer of them beat plain decoding by `margin` on a curve whose
    `pass_costs` are `pass_cost`, so `may_pay` is false without sorting anything. n nodes
    of at most p add at most n p tokens, and n p < (1 + margin) c(n + 1) - 1 for every n
    when p is below the least of ((1 + margin) c(n + 1) - 1) / n. Infinite when no draft
    fits at all."""
    cost = pass_cost[:max(0, limit)]
    if not len(cost):
        return float("inf")
    return float(np.min(((1.0 + margin) * cost - 1.0) / np.arange(1, len(cost) + 1)))


def pass_costs(curve: "_core.CostCurve") -> np.ndarray:
    """c(k + 1) for k = 1, 2, ... draft nodes, as many as `curve` prices: a pass holding the
    root and k nodes, in single-token times (empty where no draft fits)."""
    times = np.asarray(curve.times, dtype=np.float64)
    return times[1:max(1, curve.measured)] / times[0]


def plan_tree(costs: CostModel, tree: MergedTree, path_probs: np.ndarray, depth: int, budget: int,
              margin: float = 0.0) -> "_core.TreePlan | None":
    """The prefix-closed subset of `tree` (with acceptance estimates `path_probs`) with the
    best expected tokens per unit of measured cost at `depth`; None when it does not beat
    plain decoding by `margin`."""
    plan = costs.tree(path_probs, tree.parents, depth, budget)
    if not len(plan.nodes):
        return None
    return plan if plan.expected_speedup >= 1.0 + margin else None


def speedup_of(plan: "_core.TreePlan | None") -> float:
    return float(plan.expected_speedup) if plan is not None and len(plan.nodes) else 1.0


def draft_runs(draft_length: int, draft_speedup: float, free: "_core.TreePlan | None") -> bool:
    """Run the draft model this step? Only when its plan drafts and expects at least what
    the free candidates' plan does (a probe, speedup 1.0, runs only when they draft nothing)."""
    return draft_length > 0 and bool(np.isfinite(draft_speedup)) and draft_speedup >= speedup_of(free)
