"""`auto`: every proposer's candidates merged into one draft tree, sized by the cost model.

Per step:

    lookup.candidates ─┐
    ngram.candidates  ─┼─ merge_trees ─ plan_tree ──────────────────────┐
    lookahead pool    ─┘   (one prefix tree,     (calibrated estimates, ├─ Draft
                            max of estimates)     best expected tokens  │
                                                  per measured cost)    │
    The pool offers candidates only where a node of its could pay (its best estimate
    against `policy.pay_threshold`), else as a probe every `AutoTuning.probe_every` steps.
    Medusa heads: on the same terms as method "medusa" (only where a tree of theirs
    alone pays for their time, or as a rare probe), merged in with the free candidates.
    draft model: only if loaded (`draft_may_pay`) and its own plan expects more than
    the free tree (`draft_runs`); greedy: merged in and planned again; sampling: its
    chain (with q) is verified on its own instead.

The estimates are rescaled by `Calibration` (accepted versus predicted nodes per proposer
and band of estimate) before planning, and a step drafts only if its plan beats plain
decoding by `AutoTuning.plan_margin`; where not even the likeliest candidates, taken
together whatever their places, could (`policy.may_pay`), the tree is not built at all.
Each proposer learns its acceptance from the committed tokens, whether or not its nodes
were verified, and carries what transfers from call to call as it does as a method alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence, Union

import numpy as np

from ... import _core, defaults
from ...cost_model import CostModel
from ...types import Draft, SamplingConfig, StepOutcome
from ..base import Proposer
from ..draft import DraftModel
from ..lookahead import Lookahead
from ..lookup import PromptLookup
from ..medusa import Medusa
from ..ngram import NgramCacheDrafter
from ..candidate import Candidate, CandidateProposer
from .calibration import Calibration
from .merge import MergedTree, merge_trees
from .policy import (AutoTuning, check_named_draft, draft_cost_floor, draft_may_pay, draft_runs, local_draft_path,
                     may_pay, pass_costs, pay_threshold, plan_tree)

if TYPE_CHECKING:
    from ...model import Model

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class _Step:
    """What this step verified: the merged tree and the nodes of it in the draft (tree None:
    no tree was built, or the draft model's own draft was verified alone, its chain then
    set), and the draft model's chain if it ran."""

    tree: MergedTree | None
    nodes: np.ndarray
    draft_chain: list[int] | None


class Auto(Proposer):
    """Every available proposer at once (method "auto", the default).

    lookup: prompt lookup (copies from the prompt and the output).
    ngram_static, ngram_dynamic: n-gram caches (as for method "ngram"); used when given.
    lookahead: the lookahead n-gram pool (no Jacobi window).
    draft: a draft Model, registry name or .gguf path (None: the target's registry pair);
      used only if its file is already on this machine and a good draft could pay on this
      device (`policy.draft_may_pay`, decided when the Generator is built).
      use_draft=False never considers one.
    medusa: Medusa heads: a heads file, `MedusaHeads` or a configured `Medusa`; None: the heads `pyaccel medusa
      train` wrote for the target, if there are any and the Model has hidden states
      (created with embeddings=True, as the CLI does when such heads exist); False: none.
    extra: more proposers offering candidates (`CandidateProposer`: the Proposer hooks
      with `candidates(tokens, budget)` in place of `propose`).
    tuning: `AutoTuning` (its `calibration` field: `CalibrationTuning`); costs: a cost
    model to plan with instead of the target's.
    """

    name = "auto"

    def __init__(self, *, lookup: bool = True, ngram_static: PathLike | None = None,
                 ngram_dynamic: PathLike | None = None, lookahead: bool = True, draft: object = None,
                 use_draft: bool = True, medusa: object = None, extra: Sequence[CandidateProposer] = (), tuning: AutoTuning | None = None,
                 costs: CostModel | None = None) -> None:
        self.tuning = tuning if tuning is not None else AutoTuning()
        self.tuning.validate()
        self.calibration = Calibration(self.tuning.calibration)
        self._costs = costs
        self._draft_arg = draft
        self.use_draft = use_draft
        self.subs: list[CandidateProposer] = []
        if lookup:
            self.subs.append(PromptLookup(tuning=self.tuning.prompt_lookup, costs=costs))
        if ngram_static is not None or ngram_dynamic is not None:
            self.subs.append(NgramCacheDrafter(static_path=ngram_static, dynamic_path=ngram_dynamic, costs=costs))
        for sub in extra:
            if not callable(getattr(sub, "candidates", None)):
                raise TypeError(f"auto's extra proposers need a candidates(tokens, budget) method; "
                                f"{type(sub).__name__} has none")
            self.subs.append(sub)
        self.use_lookahead = lookahead
        self._lookahead: Lookahead | None = None
        self._medusa_arg = medusa
        self.medusa: Medusa | None = None
        self.drafter: DraftModel | None = None
        self._max_leaves = defaults.N_SEQ_MAX
        self._step: _Step | None = None
        self._counts: dict[str, float] = {}
        self._greedy = True
        # The curve last priced, its `pass_costs` and its `pay_threshold` per margin.
        self._held: tuple["_core.CostCurve", np.ndarray, dict[float, float]] | None = None
        self._asked: list[CandidateProposer] = []  # the proposers that offered candidates this step
        self._skipped: dict[int, int] = {}  # per gated proposer (index in subs): steps since it offered

    # ---- set-up ---------------------------------------------------------------------------

    def bind(self, target: "Model") -> None:
        if self._costs is None:
            self._costs = target.costs
        self._max_leaves = target.backend.n_seq_max
        if self.use_lookahead and self._lookahead is None:  # the pool alone: no window, sized to the context
            guesses = self._pool_guesses(target.backend.max_batch)
            if guesses > 0:
                self._lookahead = Lookahead(window=0, ngram=self.tuning.lookahead_ngram, cost_model=False,
                                            guesses=guesses)
                self.subs.append(self._lookahead)
        if self.medusa is None:
            self.medusa = self._bind_medusa(target)
            if self.medusa is not None:
                self.subs.append(self.medusa)
        for sub in self.subs:
            sub.bind(target)
        self.drafter = self._bind_draft(target)

    def _pool_guesses(self, max_batch: int) -> int:
        """How many of the pool's n-grams one pass may verify: as tuned, within the model's
        sequences (one per guess) and its batch (1 + guesses * (ngram - 1) tokens); 0 leaves
        the pool out (a model opened with a tiny batch or context)."""
        per_guess = max(1, self.tuning.lookahead_ngram - 1)
        return max(0, min(self.tuning.lookahead_guesses, self._max_leaves, (max_batch - 1) // per_guess))

    def _bind_medusa(self, target: "Model") -> Medusa | None:
        """Medusa heads as one more proposer: the ones given, else the target's cached ones
        where the Model has hidden states (bound with the other proposers)."""
        arg = self._medusa_arg
        if arg is False:
            return None
        if isinstance(arg, Medusa):
            return arg
        if arg is None:
            from ..medusa.format import default_heads_path

            if not target.backend.config.embeddings or not default_heads_path(target).exists():
                return None
        return Medusa(None if arg is None or arg is True else arg, costs=self._costs)

    def _bind_draft(self, target: "Model") -> DraftModel | None:
        """The draft model, loaded only where a good one could pay on this device."""
        if not self.use_draft:
            return None
        path = local_draft_path(target, self._draft_arg)
        if path is not None and self._draft_arg is not None:
            check_named_draft(target, self._draft_arg, path)  # fails now, not when it would pay
        assert self._costs is not None
        depths = [0, target.n_ctx // 2]
        if path is None or not draft_may_pay(self._costs, depths, draft_cost_floor(path, target.path), self.tuning):
            return None
        drafter = DraftModel(self._draft_arg if self._draft_arg is not None else path,
                             max_draft=self.tuning.draft_max, costs=self._costs)
        drafter.bind(target)
        return drafter

    # ---- a generation ---------------------------------------------------------------------

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        self._greedy = sampling.greedy
        for sub in self._all():
            sub.begin(prompt, sampling)
        self._step = None
        self._skipped.clear()

    def _all(self) -> list[CandidateProposer | DraftModel]:
        return [*self.subs, *([self.drafter] if self.drafter is not None else [])]

    def propose(self, tokens: list[int], budget: int) -> Draft:
        assert self._costs is not None, "Auto is not bound to a target"
        self._count("steps")
        depth = len(tokens)
        curve = self._costs.curve(depth)
        self._asked = self._offering(curve)
        cands = [c for sub in self._asked for c in sub.candidates(tokens, budget)]
        tree: MergedTree | None = None
        plan: "_core.TreePlan | None" = None
        if self._may_pay(cands, curve, budget):
            tree = merge_trees(cands, self._max_leaves)
            plan = self._plan(tree, depth, budget)
        chain: list[int] | None = None
        if self.drafter is not None:
            dp = self.drafter.plan(tokens, budget)
            if draft_runs(dp.length, dp.expected_speedup, plan):
                self._count("draft_model_runs")
                own = self.drafter.draft(tokens, dp.length)
                chain = own.tokens.tolist()
                if not self._greedy:  # sampled drafts carry q: verified on their own
                    self._step = _Step(None, np.arange(len(own)), chain)
                    self._count_nodes("drafted", [self.drafter.name] * len(own))
                    return own
                tree = merge_trees(cands + [self.drafter.candidate(own)], self._max_leaves)
                plan = self._plan(tree, depth, budget)
        nodes = np.asarray(plan.nodes if plan is not None else [], dtype=np.int64)
        self._step = _Step(tree, nodes, chain)
        if tree is None or plan is None or not len(nodes):
            return Draft.empty()
        self._count("drafting_steps")
        owners = [tree.sources[k] for k in tree.owner[nodes]]
        self._count_nodes("drafted", owners)
        if len(set(owners)) > 1:
            self._count("mixed_steps")
        return Draft(tree.tokens[nodes], np.asarray(plan.parents, dtype=np.int32))

    def _offering(self, curve: "_core.CostCurve") -> list[CandidateProposer]:
        """The proposers asked for candidates this step (priced on `curve`). One that bounds
        its estimates (`best_estimate`: the lookahead pool) is asked where a node of its
        could reach the estimate anything must reach to pay (`policy.pay_threshold`), and
        otherwise once every `probe_every` steps, so that it keeps learning."""
        threshold: float | None = None
        out = []
        for k, sub in enumerate(self.subs):
            best = getattr(sub, "best_estimate", None)
            if best is not None:
                if threshold is None:
                    threshold = self._threshold(curve, self.tuning.plan_margin)
                skipped = self._skipped.get(k, 0)
                if best() < threshold and skipped + 1 < self.tuning.probe_every:
                    self._skipped[k] = skipped + 1
                    self._count(f"skipped_{sub.name}")
                    continue
                self._skipped[k] = 0
            out.append(sub)
        return out

    def _may_pay(self, cands: list[Candidate], curve: "_core.CostCurve", budget: int) -> bool:
        """Could a tree of these candidates pay at all (`policy.may_pay` on their calibrated
        estimates, priced on `curve`)? If not, the step skips merging and planning."""
        if not cands:
            return False
        margin = self.tuning.plan_margin
        if max(self.calibration.bound(c) for c in cands) < self._threshold(curve, margin):
            return False  # most steps on free text: no node is likely enough to pay
        return may_pay(self._pass_costs(curve), self.calibration.candidates(cands), budget, margin)

    def _pass_costs(self, curve: "_core.CostCurve") -> np.ndarray:
        """`policy.pass_costs` of `curve`, kept while the curve stays the same (one curve
        covers a band of depths)."""
        held = self._held
        if held is None or held[0] is not curve:
            held = self._held = (curve, pass_costs(curve), {})
        return held[1]

    def _threshold(self, curve: "_core.CostCurve", margin: float) -> float:
        """`policy.pay_threshold` of `curve` for the largest draft it prices (a threshold
        for fewer nodes is never lower, so it holds for every budget), kept with the
        curve's `_pass_costs`."""
        cost = self._pass_costs(curve)
        assert self._held is not None
        thresholds = self._held[2]
        if margin not in thresholds:
            thresholds[margin] = pay_threshold(cost, len(cost), margin)
        return thresholds[margin]

    def _plan(self, tree: MergedTree, depth: int, budget: int) -> "_core.TreePlan | None":
        """`policy.plan_tree` with this step's margin."""
        assert self._costs is not None
        return plan_tree(self._costs, tree, self.calibration.apply(tree), depth, budget, self.tuning.plan_margin)

    def observe(self, outcome: StepOutcome) -> None:
        step = self._step
        if step is None:
            return
        if step.tree is not None:
            kept = step.nodes[np.asarray(outcome.accepted, dtype=np.int64)]
            self.calibration.record(step.tree, step.nodes, kept)
            self._count_nodes("accepted", [step.tree.sources[k] for k in step.tree.owner[kept]])
            self._count("accepted_shared", float(step.tree.shared[kept].sum()))
        else:
            self.calibration.fade()
            if step.draft_chain is not None and self.drafter is not None:  # its own draft, verified alone
                self._count_nodes("accepted", [self.drafter.name] * len(outcome.accepted))
        learners = [sub for sub in self._asked if _learns(sub)]
        drafted = self.drafter is not None and step.draft_chain is not None
        if not learners and not drafted:
            return
        committed = outcome.accepted_tokens + [outcome.next_token]
        if learners:
            as_chain = _as_chain(outcome, committed)
            for sub in learners:
                sub.observe(as_chain)
        if drafted:
            assert self.drafter is not None and step.draft_chain is not None
            self.drafter.observe(outcome if step.tree is None else _chain_outcome(outcome, step.draft_chain, committed))

    def end(self) -> None:
        for sub in self._all():
            sub.end()
        self._step = None

    def reset(self) -> None:
        for sub in self._all():
            sub.reset()

    def close(self) -> None:
        for sub in self._all():
            sub.close()

    # ---- counters -------------------------------------------------------------------------

    def _count(self, key: str, n: float = 1.0) -> None:
        self._counts[key] = self._counts.get(key, 0.0) + n

    def _count_nodes(self, what: str, sources: list[str]) -> None:
        for src in sources:
            self._count(f"{what}_{src}")

    def _counters(self) -> dict[str, float]:
        """steps, drafting_steps, mixed_steps (several proposers' nodes); drafted_/accepted_<proposer>
        (by the proposer whose estimate a token carried); accepted_shared; calibration_<proposer>
        (accepted over predicted, fading); draft_model_loaded, draft_model_runs; skipped_<proposer>."""
        return {**self._counts, **self.calibration.summary(), "draft_model_loaded": float(self.drafter is not None)}


def _learns(sub: CandidateProposer) -> bool:
    """Does `sub` learn anything from a step's outcome (prompt lookup learns from its
    shadows instead: its `observe` is the base class's, which does nothing)?"""
    return getattr(type(sub), "observe", None) is not Proposer.observe


def _as_chain(outcome: StepOutcome, committed: list[int]) -> StepOutcome:
    """The step as a proposer sees it whose draft was exactly the committed tokens (what a
    proposer that scores its own candidates against them needs). The hidden states (when
    the Model has them) are the pass's rows of the root and the kept nodes, so `tip_hidden`
    is the real tip's; no logits rows."""
    hidden = outcome.hidden
    if hidden is not None:
        hidden = hidden[np.concatenate(([0], 1 + np.asarray(outcome.accepted, dtype=np.int64)))]
    return StepOutcome(Draft.chain(committed[:-1]), list(range(len(committed) - 1)), committed[-1],
                       outcome.n_past, outcome.logits[:0], hidden)


def _chain_outcome(outcome: StepOutcome, chain: list[int], committed: list[int]) -> StepOutcome:
    """The step as the draft model sees it when its chain was merged with other proposers':
    its positions the committed tokens decide, and how many of them were right."""
    known = min(len(chain), len(committed))
    right = next((i for i in range(known) if chain[i] != committed[i]), known)
    nxt = committed[right] if right < len(committed) else committed[-1]
    return StepOutcome(Draft.chain(chain[:known]), list(range(right)), nxt, outcome.n_past, outcome.logits[:0])


__all__ = ["Auto", "AutoTuning", "Candidate"]
