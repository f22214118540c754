"""What `auto` runs and verifies: the tuning knobs and the decisions made from the cost model.

    draft_may_pay   whether the draft model is worth loading on this device at all
    pay_threshold   the estimate some node must reach for anything to pay (before may_pay)
    may_pay         whether any tree of this step's candidates could pay (before merging)
    plan_tree       the subset of the merged tree worth verifying this step
    draft_runs      whether this step's draft-model run is expected to beat the free tree

Lookup and the n-gram caches offer candidates every step. The lookahead pool does where
one of its nodes could reach `pay_threshold` (its learnt first-position hazard at most)
and otherwise only every `probe_every` steps: its step costs about 0.1 ms on the caches a
decode has just emptied (`benchmarks/cold_own_time.py`; a 1.5B target's pass takes 37 ms
on the AMD EPYC host), where replays of the floor's 42 prompts (5,460 steps) drafted one
node of it and of the 20 edit prompts (1,109 steps) three, none kept
(`benchmarks/replay_passes.py`). The draft
model costs a decode per drafted token, so it runs only when its own plan (catch-up and
draft tokens counted) expects more than the free tree.
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

    # The draft-model gate assumes a draft as good as same-family drafts get (this
    # acceptance per token) at the least it can cost: its file size over the target's (a
    # single-token decode reads every weight once). If even that cannot beat plain decoding
    # by draft_margin at any depth checked, the draft model is never loaded.
    draft_alpha: float = 0.8
    draft_margin: float = 0.05
    draft_max: int = 16
    # The deepest prompt-lookup draft (its own default).
    lookup_max_draft: int = 64
    # Pool-only lookahead: n-grams of this many tokens, this many kept per first token.
    lookahead_ngram: int = 5
    lookahead_guesses: int = 7
    # A proposer that bounds its estimates (the lookahead pool), where no node of its could
    # pay, offers candidates (and learns from them) once every this many steps.
    probe_every: int = 16
    # A step drafts only if its plan expects to beat plain decoding by this much. A plan is
    # the best of many subsets of noisy estimates, so its own estimate errs high, and what
    # the cost curve leaves out (building, merging and verifying the tree) is paid per
    # step: on the floor suites, plans predicted to gain 3-10% realised 0.89-1.01x before
    # that own time (benchmarks/plan_calibration.py, docs/benchmarks.md), a bet that adds
    # only variance.
    plan_margin: float = 0.10
    # The margin for the expected tokens of nodes whose estimates the proposer learnt
    # itself from every position and carries from call to call (`Candidate.learnt`:
    # prompt lookup's copy statistics); a plan's margin is the two weighed by its expected
    # tokens of each kind. Their errors are not a best-of-many-subsets bias, and at 0 auto
    # drafts them on any plan that beats plain decoding, as lookup does. Measured on the
    # AMD EPYC host (docs/benchmarks.md) 0 left the edit suites' medians where they were
    # (it won some one-token drafts at the start of copies and lost others) and took the
    # math suite from 0.967x to 0.951x: on answers that restate the question with one term
    # changed, the copy estimates are high right where the copy breaks. So it stays at
    # plan_margin.
    learnt_plan_margin: float = 0.10
    # On top of those, this much times the chance that the plan's every node is rejected
    # (`rejection_chance`). A plan that will most likely be rejected whole is a bet whose
    # expected gain is a small share of the pass it costs: on a short answer one or two such
    # lost bets are the answer's whole speed (rag-483 on the AVX-512 Xeon host: 19 tokens,
    # two 3-node drafts of fresh prose matches at the answer's start, both rejected,
    # 0.90x timed). Replayed on that host's curve (docs/benchmarks.md) 0.10 lifted the
    # lowest of 42 floor prompts from 0.906x to 0.951x, the geometric mean 1.054x to 1.055x
    # and the edit suites' 3.340x to 3.343x; on the AMD EPYC host's curve (rebuilt from its
    # table) the lowest floor prompt from 0.960x to 0.980x and the edits from 2.093x to
    # 2.110x, the floor's geometric mean 1.0086x to 1.0077x.
    risk_margin: float = 0.10
    # Plan a step whose candidates include a probe (`Candidate.probe`: prompt lookup's copy
    # reaching the opening line of a prompt's code block) without the three margins above,
    # as the proposer alone would. Otherwise the margins decline the small draft of the
    # fence line's end and the block's first tokens, and the next step bets a long draft on
    # the block's first line from the opening statistics, which answers that open with new
    # lines (imports, a decorator) lose whole. Timed on the AVX-512 Xeon host
    # (docs/benchmarks.md) it took auto from 7.0% to 1.2% behind lookup on `edit_holdout`,
    # the four such answers from behind lookup to ahead; replayed, the floor moved by under
    # 0.2% on that host's curve and the AMD EPYC host's.
    entry_probes: bool = True
    # How the proposers' estimates are rescaled by what verification (and shadows) found.
    calibration: CalibrationTuning = field(default_factory=CalibrationTuning)
    # The knobs of auto's prompt lookup (those of method "lookup").
    prompt_lookup: LookupTuning = field(default_factory=LookupTuning)

    def validate(self) -> None:
        self.calibration.validate()
        self.prompt_lookup.validate()  # also where auto runs without prompt lookup
        if not 0.0 < self.draft_alpha < 1.0:
            raise ValueError(f"draft_alpha must be in (0, 1), got {self.draft_alpha}")
        for name in ("draft_max", "lookup_max_draft", "lookahead_guesses", "probe_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("plan_margin", "learnt_plan_margin", "risk_margin"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
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
              margin: float = 0.0, learnt_margin: float | None = None,
              risk_margin: float = 0.0) -> "_core.TreePlan | None":
    """The prefix-closed subset of `tree` (with acceptance estimates `path_probs`) with the
    best expected tokens per unit of measured cost at `depth`; None when it does not beat
    plain decoding by its margin: `margin` for the expected tokens of its nodes with
    unlearnt estimates and `learnt_margin` (None: `margin`) for those of `tree.learnt`
    nodes, weighed by each kind's share (`plan_margin`), plus `risk_margin` times the
    chance that every node of it is rejected (`rejection_chance`)."""
    plan = costs.tree(path_probs, tree.parents, depth, budget)
    if not len(plan.nodes):
        return None
    nodes = np.asarray(plan.nodes, dtype=np.int64)
    need = margin
    if learnt_margin is not None and learnt_margin != margin:
        need = plan_margin(path_probs[nodes], tree.learnt[nodes], margin, learnt_margin)
    if risk_margin > 0.0:
        need += risk_margin * rejection_chance(nodes, tree.parents, path_probs)
    return plan if plan.expected_speedup >= 1.0 + need else None


def rejection_chance(nodes: np.ndarray, parents: np.ndarray, path_probs: np.ndarray) -> float:
    """P(a draft of the tree nodes `nodes` (prefix-closed) keeps none of them): one minus
    the estimates of its nodes under the root, exclusive events (siblings sum to at most
    their parent's estimate, the root's 1)."""
    first = nodes[parents[nodes] < 0]
    return max(0.0, 1.0 - float(np.sum(path_probs[first])))


def plan_margin(probs: np.ndarray, learnt: np.ndarray, margin: float, learnt_margin: float) -> float:
    """The margin a plan must beat plain decoding by: `margin` and `learnt_margin` weighed
    by the expected tokens (`probs`) of its unlearnt and its `learnt` nodes."""
    total = float(np.sum(probs))
    if total <= 0.0:
        return margin
    share = float(np.sum(probs[learnt])) / total
    return share * learnt_margin + (1.0 - share) * margin


def speedup_of(plan: "_core.TreePlan | None") -> float:
    return float(plan.expected_speedup) if plan is not None and len(plan.nodes) else 1.0


def draft_runs(draft_length: int, draft_speedup: float, free: "_core.TreePlan | None") -> bool:
    """Run the draft model this step? Only when its plan drafts and expects at least what
    the free candidates' plan does (a probe, speedup 1.0, runs only when they draft nothing)."""
    return draft_length > 0 and bool(np.isfinite(draft_speedup)) and draft_speedup >= speedup_of(free)
