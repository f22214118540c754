"""Medusa decoding: trained heads over the target's last hidden state propose a token tree
that the target verifies in one pass (Cai et al. 2024).

Each step the heads read the hidden state of the last kept token (the prefill's last row
on the first step, `StepOutcome.tip_hidden` after), rank their draft vocabulary, and a
tree of their choices (`trees`: static from measured rank accuracies, or grown per step
by path probability) goes to the verifier: greedy, lossless sampling (the proposals are
deterministic, a one-hot q) or, opted into, typical acceptance (not lossless).

Running the heads costs time before anything is verified, so with the cost model on
(the default) a step runs them only where the tree they are expected to give pays on
this device, heads included:

    gain = E[tokens] - t[m + 1]      (relative to one target token; plain decoding: 0)
    run the heads when gain > c      c = the heads' time over one target token's, both
                                     timed on recent steps (the load of a machine changes)

(static: the best plan on the calibrated static tree, known before running the heads;
dynamic: a decayed mean of the gains its recent trees planned). Once run, their cost is
sunk and the subset of the tree with the best expected tokens per cost is verified. When
nothing pays the heads stay off and run once every `recheck_every` steps (a probe, rarer
where the heads are slow: at most `probe_share` of the time), so that the calibration
(`calibration`) keeps learning; each probe after which they still do not pay doubles the
interval (up to `probe_backoff_max` steps; kept from call to call on one Generator, as
the calibration is), so heads that never pay on a device cost almost nothing there;
where even a tree that is always accepted cannot pay, they never run. The gate's own
plan is reused for `gate_reuse` steps while the depth's cost curve and the calibration
stay the same and the step's limit does not grow.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ... import _core
from ...cost_model import DEPTH_STEP, CostModel
from ...types import Draft, SamplingConfig, StepOutcome
from ..base import Proposer
from ..candidate import Candidate
from .calibration import DepthCalibration, TreeShadows
from .heads import MedusaHeads
from .trees import TreeShape, grow_tree, static_scores

if TYPE_CHECKING:
    from ...model import Model

TREES = ("static", "dynamic")


@dataclass(frozen=True)
class MedusaTuning:
    """The knobs of Medusa decoding beyond its constructor's."""

    # With the cost model on and nothing paying, run the heads once in this many steps, or
    # in more where their time would exceed probe_share of those steps' plain decoding.
    recheck_every: int = 32
    probe_share: float = 0.02
    # Each probe after which the heads still do not pay doubles the probe interval, up to
    # this many steps; a step where they pay sets it back to recheck_every.
    probe_backoff_max: int = 512
    # Steps for which the gate's decision is reused (same depth bucket and calibration, no
    # larger limit): the heads' measured cost drifts slowly.
    gate_reuse: int = 8
    # Per-depth calibration of path scores: decay per observed tree, prior weight (in
    # expected acceptances) of "the scores are right".
    calibration_decay: float = 0.98
    calibration_prior: float = 4.0
    # Dynamic trees: decay of the mean planned gain that decides whether the heads run.
    gain_decay: float = 0.8
    # Decay of the heads' measured time per step.
    heads_time_decay: float = 0.9
    # Timed runs of the heads when binding, before any step has timed them.
    bind_timings: int = 3

    def validate(self) -> None:
        if self.recheck_every < 1 or self.bind_timings < 1 or self.gate_reuse < 1:
            raise ValueError(f"recheck_every, bind_timings and gate_reuse must be >= 1, got {self.recheck_every}, "
                             f"{self.bind_timings}, {self.gate_reuse}")
        if self.probe_backoff_max < self.recheck_every:
            raise ValueError(f"probe_backoff_max must be >= recheck_every, got {self.probe_backoff_max} < "
                             f"{self.recheck_every}")
        for name in ("probe_share", "calibration_decay", "gain_decay", "heads_time_decay"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if self.calibration_prior <= 0.0:
            raise ValueError(f"calibration_prior must be > 0, got {self.calibration_prior}")


def typical_params(typical: object) -> "_core.TypicalParams | None":
    """None / False: exact verification; True: typical acceptance with the core's defaults;
    a `_core.TypicalParams`: those thresholds."""
    if typical is None or typical is False:
        return None
    if typical is True:
        return _core.TypicalParams()
    if isinstance(typical, _core.TypicalParams):
        return typical
    raise TypeError(f"typical must be None, True or a pyaccel._core.TypicalParams(epsilon, delta), got {typical!r}")


def with_step_cost(curve: "_core.CostCurve", cost: float) -> "_core.CostCurve":
    """`curve` with a fixed cost per drafting step (relative to one token) on every size
    that verifies a draft; plain decoding (one token) pays none of it."""
    t = np.asarray(curve.times, dtype=np.float64)
    return _core.CostCurve(np.concatenate((t[:1], t[1:] + cost * t[0])).tolist())


class Medusa(Proposer):
    """Medusa heads as a `Generator` method.

    heads: a heads file or a loaded `MedusaHeads`; None: the heads `pyaccel medusa train`
      wrote for the target in the user cache.
    tree: "static" (from the heads' measured rank accuracies) or "dynamic" (per step, by
      path probability).
    max_nodes, topk: the most tree nodes, and ranks per head considered.
    max_paths: the most root-to-leaf paths (attention sequences; default: the Model's n_seq_max).
    cost_model: False verifies the whole tree every step (to measure tau); True verifies
      what pays on this device and runs the heads only where a tree pays.
    typical: None for exact verification (greedy, lossless sampling); True or a
      `_core.TypicalParams` for typical acceptance when sampling, which is NOT lossless: it
      keeps any drafted token the target finds likely enough, so the output distribution is
      no longer exactly the target's. At temperature 0 verification stays greedy.
    costs: a cost model to plan with instead of the target's; heads_cost: the heads' time
      per step over one target token's (default: measured).
    The Model must be created with embeddings=True (the heads read its hidden states).
    """

    name = "medusa"

    def __init__(self, heads: str | os.PathLike[str] | MedusaHeads | None = None, *, tree: str = "static",
                 max_nodes: int = 64, topk: int = 10, max_paths: int | None = None, cost_model: bool = True,
                 typical: object = None, costs: CostModel | None = None, heads_cost: float | None = None,
                 tuning: MedusaTuning | None = None) -> None:
        if tree not in TREES:
            raise ValueError(f"medusa tree must be one of {', '.join(TREES)}, got {tree!r}")
        for label, value in (("max_nodes", max_nodes), ("topk", topk), ("max_paths", max_paths)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"medusa {label} must be an int >= 1, got {value!r}")
        if heads_cost is not None and not heads_cost >= 0.0:
            raise ValueError(f"heads_cost must be >= 0 (the heads' time over one target token's), got {heads_cost}")
        self._heads_arg = heads
        self.tree, self.max_nodes, self.topk, self.max_paths = tree, max_nodes, topk, max_paths
        self.cost_model = bool(cost_model)
        self.typical = typical_params(typical)
        self.tuning = tuning if tuning is not None else MedusaTuning()
        self.tuning.validate()
        self._costs = costs
        self._heads_cost = heads_cost
        self.heads: MedusaHeads | None = None
        self._h: npt.NDArray[np.float32] | None = None
        self._proposed_at: float | None = None
        self._counts: dict[str, float] = {}

    # ---- set-up ---------------------------------------------------------------------------

    def bind(self, target: "Model") -> None:
        backend = target.backend
        if not backend.config.embeddings:
            raise ValueError("Medusa heads read the target's hidden states: create the Model with "
                             "pyaccel.Model(..., embeddings=True) (the CLI's --method medusa does)")
        self.heads = heads = self._load(target)
        paths = self.max_paths if self.max_paths is not None else backend.n_seq_max
        if paths > backend.n_seq_max:
            raise ValueError(f"medusa max_paths={paths} needs {paths} attention sequences but the model allows "
                             f"{backend.n_seq_max}: open it with pyaccel.Model(..., n_seq_max={paths})")
        self._paths = paths
        self._backend = backend
        self._static: TreeShape | None = None
        if self.tree == "static":
            topk = min(self.topk, heads.weights.draft_vocab)
            self._static = grow_tree(static_scores(heads.meta.rank_accuracy, topk), self.max_nodes, paths)
            self._static_layout = _core.tree_layout(self._static.parents)
        t = self.tuning
        self._calibration = DepthCalibration(heads.n_heads, t.calibration_decay, t.calibration_prior)
        self._shadows = TreeShadows(self._calibration)
        self._heads_s = self._time_heads(heads, backend.n_embd)
        self._token_s = 1.0
        if self.cost_model:
            if self._costs is None:
                self._costs = target.costs
            if self._heads_cost is None:
                measured = self._costs.measured
                self._token_s = measured.token_s if measured is not None else self._costs.token_s(backend)
        self._gain = self._prior_gain()
        self._probe_every = float(t.recheck_every)
        self._gate_memo: tuple[tuple[int, int], int, int, bool] | None = None
        self._counts = {k: 0.0 for k in ("steps", "heads_runs", "probes", "verified_steps", "drafted", "accepted",
                                         "tree_nodes")}

    def _load(self, target: "Model") -> MedusaHeads:
        from .format import check_target, default_heads_path, load_heads

        arg = self._heads_arg if self._heads_arg is not None else default_heads_path(target)
        if not isinstance(arg, MedusaHeads) and not Path(arg).is_file():
            named = "" if self._heads_arg is None else f" -o {shlex.quote(os.fspath(arg))}"
            raise FileNotFoundError(f"no Medusa heads file at {arg}: train heads for {target.name!r} with "
                                    f"`pyaccel medusa train -m {target.cli_arg}{named}` (about 30 minutes on "
                                    "a 2-core CPU)")
        heads = arg if isinstance(arg, MedusaHeads) else load_heads(arg)
        if not isinstance(heads, MedusaHeads):
            raise TypeError(f"heads must be a heads file path or a MedusaHeads, got {type(heads).__name__}")
        check_target(heads.meta, target)
        if heads.weights.n_embd != target.backend.n_embd:
            raise ValueError(f"the heads read hidden states of size {heads.weights.n_embd} but {target.name!r} has "
                             f"{target.backend.n_embd}: train heads for this model (pyaccel medusa train)")
        return heads

    def _time_heads(self, heads: MedusaHeads, n_embd: int) -> float:
        """Least wall time of one heads run (ranking and tree) before any step has timed one."""
        h = np.zeros(n_embd, np.float32)
        best = float("inf")
        for _ in range(self.tuning.bind_timings):
            t0 = time.perf_counter()
            self._tree_at(heads, h, int(heads.weights.vocab[0]))
            best = min(best, time.perf_counter() - t0)
        return best

    @property
    def heads_cost(self) -> float:
        """The heads' time per step over one target token's."""
        return self._heads_cost if self._heads_cost is not None else self._heads_s / self._token_s

    # ---- plans ----------------------------------------------------------------------------

    def _prior_gain(self) -> float:
        """What a dynamic tree is expected to gain before any has been planned: the static
        tree's estimate where the heads carry rank accuracies, else unbounded (try them)."""
        if self._static is not None or not self.cost_model or self.heads is None:
            return float("inf")
        try:
            shape = grow_tree(static_scores(self.heads.meta.rank_accuracy, self.topk), self.max_nodes, self._paths)
        except ValueError:
            return float("inf")
        assert self._costs is not None
        return _gain(self._costs.tree(shape.score, shape.parents, 0, self.max_nodes))

    def _worth_running(self, depth: int, limit: int) -> bool:
        assert self._costs is not None
        c = self.heads_cost
        if self._static is None:
            return self._gain > c
        key = (depth // DEPTH_STEP, self._calibration.observed)
        memo = self._gate_memo
        if memo is not None and memo[0] == key and self._counts["steps"] - memo[1] < self.tuning.gate_reuse:
            # A tree that does not pay within `limit` nodes does not within fewer.
            if limit == memo[2] or (limit < memo[2] and not memo[3]):
                return memo[3]
        worth = self._static_pays(depth, limit, c)
        self._gate_memo = (key, int(self._counts["steps"]), limit, worth)
        return worth

    def _static_pays(self, depth: int, limit: int, c: float) -> bool:
        """Does the best plan on the calibrated static tree pay, the heads' cost c included?"""
        assert self._costs is not None and self._static is not None
        shape = self._static.prefix(limit)
        curve = with_step_cost(self._costs.curve(depth), c)
        plan = _core.tree_plan(curve, self._calibration.apply(shape), shape.parents, min(limit, curve.measured - 1))
        return len(plan.nodes) > 0

    def _could_pay(self, depth: int, limit: int) -> bool:
        """Could a tree that is always accepted along its K heads beat plain decoding?"""
        assert self._costs is not None and self.heads is not None
        k = min(self.heads.n_heads, limit, self._costs.max_nodes(depth))
        curve = self._costs.curve(depth)
        return k >= 1 and k + 1 - curve.cost_at(k + 1) / curve.cost_at(1) > self.heads_cost

    def _gate(self, depth: int, limit: int) -> bool:
        """Run the heads this step? (cost model on)"""
        if self._worth_running(depth, limit):
            self._idle = 0
            self._probe_every = float(self.tuning.recheck_every)
            return True
        self._idle += 1
        every = max(self._probe_every, self.heads_cost / self.tuning.probe_share)
        if self._idle >= every and self._could_pay(depth, limit):
            self._idle = 0
            self._probe_every = min(2.0 * self._probe_every, float(self.tuning.probe_backoff_max))
            self._counts["probes"] += 1
            return True
        return False

    # ---- a generation ---------------------------------------------------------------------

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        # The loop calls begin right after the prefill: the last row is the prompt's last token.
        self._h = np.array(self._backend.embeddings_rows()[-1], dtype=np.float32)
        self._proposed_at = None
        self._idle = 0
        self._shadows.clear()

    def _tree_at(self, heads: MedusaHeads, h: npt.NDArray[np.float32],
                 token: int) -> tuple[TreeShape, npt.NDArray[np.int32]]:
        """The heads' ranking at hidden state h, whose logits gave `token` (the last committed
        token, which token-conditioned heads read), and the tree over it: (shape, node tokens)."""
        ids, probs = heads.weights.top(h, self.topk, token)
        if self._static is not None:
            shape = self._static
        else:
            shape = grow_tree(np.clip(probs, 0.0, 1.0), self.max_nodes, self._paths)
        return shape, shape.tokens(ids)

    def propose(self, tokens: list[int], budget: int) -> Draft:
        draft = self._draft(tokens, budget)
        self._proposed_at = time.perf_counter()
        return draft

    def _draft(self, tokens: list[int], budget: int) -> Draft:
        depth, limit = len(tokens), min(budget, self.max_nodes)
        tree = self._heads_tree(tokens, limit)
        if tree is None:
            return Draft.empty()
        draft = self._choose(*tree, depth, limit)
        self._counts["tree_nodes"] += len(draft)
        self._counts["verified_steps"] += float(len(draft) > 0)
        return draft

    def candidates(self, tokens: list[int], budget: int) -> list[Candidate]:
        """The heads' tree (its first min(budget, max_nodes) nodes) with calibrated
        P(accepted) per node: the public candidates API (`pyaccel.methods.candidate`), in
        place of `propose`. The heads run on the same terms as under `propose` (with the
        cost model on: where a tree of theirs alone pays for their time, or as a probe);
        `observe` needs the step's hidden states as under `propose`."""
        limit = min(budget, self.max_nodes)
        tree = self._heads_tree(tokens, limit)
        if tree is None:
            return []
        shape, toks = tree
        n = min(limit, len(shape))
        probs = self._calibration.apply(shape)
        if self.cost_model and self._static is None:
            self._note_gain(self._costs_tree(probs, shape, len(tokens), limit))
        return [Candidate(toks[:n], shape.parents[:n], probs[:n], self.name)]

    def _heads_tree(self, tokens: list[int], limit: int) -> tuple[TreeShape, npt.NDArray[np.int32]] | None:
        """Settle the calibration with the tokens so far, then the heads' tree and its node
        tokens, or None where the heads do not run this step."""
        self._counts["steps"] += 1
        self._shadows.settle(tokens)
        if self._h is None or limit < 1 or (self.cost_model and not self._gate(len(tokens), limit)):
            return None
        assert self.heads is not None
        t0 = time.perf_counter()
        shape, toks = self._tree_at(self.heads, self._h, tokens[-1])
        self._note_heads_time(time.perf_counter() - t0)
        self._shadows.add(len(tokens), shape, toks)
        return shape, toks

    def _note_heads_time(self, seconds: float) -> None:
        self._counts["heads_runs"] += 1
        self._counts["heads_s"] = self._counts.get("heads_s", 0.0) + seconds
        d = self.tuning.heads_time_decay
        self._heads_s = d * self._heads_s + (1.0 - d) * seconds

    def _note_pass_time(self, outcome: StepOutcome) -> None:
        """Learn one target token's time now from the pass just verified (scaled by the
        curve to one token), so the heads' cost is the ratio of two recent timings on a
        machine whose load changes."""
        if self._proposed_at is None or self._costs is None or self._heads_cost is not None:
            return
        curve = self._costs.curve(outcome.n_past)
        seconds = (time.perf_counter() - self._proposed_at) * curve.cost_at(1) / curve.cost_at(1 + len(outcome.draft))
        d = self.tuning.heads_time_decay
        self._token_s = d * self._token_s + (1.0 - d) * seconds
        self._proposed_at = None

    def _choose(self, shape: TreeShape, toks: npt.NDArray[np.int32], depth: int, limit: int) -> Draft:
        """The nodes verified: the tree's first `limit` (cost model off), or the subset with
        the best expected tokens per cost (the heads' time is spent by now)."""
        if not self.cost_model:
            n = min(limit, len(shape))
            layout = self._static_layout if shape is self._static and n == len(shape) else None
            return Draft(toks[:n], shape.parents[:n], layout=layout)
        plan = self._costs_tree(self._calibration.apply(shape), shape, depth, limit)
        if self._static is None:
            self._note_gain(plan)
        if not len(plan.nodes):
            return Draft.empty()
        nodes = np.asarray(plan.nodes, np.int64)
        layout = self._static_layout if shape is self._static and len(nodes) == len(shape) else None
        return Draft(toks[nodes], np.asarray(plan.parents, np.int32), layout=layout)

    def _costs_tree(self, probs: npt.NDArray[np.float64], shape: TreeShape, depth: int,
                    limit: int) -> "_core.TreePlan":
        assert self._costs is not None
        return self._costs.tree(probs, shape.parents, depth, limit)

    def _note_gain(self, plan: "_core.TreePlan") -> None:
        """A dynamic tree's planned gain, into the decayed mean that gates the heads."""
        g = self.tuning.gain_decay
        self._gain = _gain(plan) if not np.isfinite(self._gain) else g * self._gain + (1.0 - g) * _gain(plan)

    def observe(self, outcome: StepOutcome) -> None:
        hidden = outcome.tip_hidden
        if hidden is None:
            raise ValueError("the step carried no hidden states: create the Model with embeddings=True")
        self._h = np.array(hidden, dtype=np.float32)
        self._note_pass_time(outcome)
        self._counts["drafted"] += len(outcome.draft)
        self._counts["accepted"] += len(outcome.accepted)

    def end(self) -> None:
        self._h = None
        self._proposed_at = None
        self._shadows.clear()

    def _counters(self) -> dict[str, Any]:
        c = self._counts
        runs = c.get("heads_runs", 0.0)
        out = dict(c)
        out.update(heads_ms=1e3 * c.get("heads_s", 0.0) / runs if runs else float("nan"),
                   heads_cost=self.heads_cost if self.heads is not None else float("nan"),
                   nodes_per_verified_step=c["tree_nodes"] / c["verified_steps"] if c.get("verified_steps") else 0.0)
        if self.heads is not None:
            out.update({f"depth{d + 1}_scale": float(s) for d, s in enumerate(self._calibration.scale())})
        return out


def _gain(plan: "_core.TreePlan") -> float:
    """Expected tokens gained per step over plain decoding, in single-token times:
    E - t[m + 1] / t[1] = E (1 - 1 / speedup)."""
    return float(plan.expected_tokens * (1.0 - 1.0 / plan.expected_speedup)) if len(plan.nodes) else 0.0
