"""Speculative decoding with a small draft GGUF model (Leviathan et al. 2023; Chen et al. 2023).

Each step the draft extends the committed tokens autoregressively; the target verifies
the whole chain (or a small tree: the draft's second choice as a sibling where it is
likely) in one pass. The draft's distributions q go to the verifier, so sampling stays
lossless. How many tokens to draft comes from the measured cost curve of the target and
the measured cost of a draft token, with per-position acceptance tracked online: on a
device where drafting cannot pay, the method drafts nothing.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .. import _core
from ..cost_model import CostModel
from ..decode import new_rng, sampling_params
from ..errors import IncompatibleModelsError
from ..types import Draft, SamplingConfig, StepOutcome
from ..vocab import compare_vocabularies
from .candidate import Candidate
from .base import Proposer

if TYPE_CHECKING:
    from ..backend import Vocabulary
    from ..model import Model

# Separates the draft's random stream from the target's under one user seed.
DRAFT_SEED_SALT = 0x5DEECE66D
# Catching the draft model up over the tokens it has not seen (the prompt, at first) is
# paid once and serves every later step: a plan charges it spread over this many steps.
CATCH_UP_STEPS = 8
# Only drafting whose perfect-acceptance speedup clears plain decoding by this margin is
# considered at all, so a few noisy timings cannot flip the decision from run to run.
CAN_PAY_MARGIN = 0.05


def check_draft_vocabulary(target: "Model", draft: "Vocabulary", draft_name: str) -> None:
    """IncompatibleModelsError unless `draft` (a loaded model's or a file's vocabulary) can
    propose tokens for `target`."""
    diff = compare_vocabularies(target.backend, draft)
    if not diff.ok:
        raise IncompatibleModelsError(
            f"{draft_name!r} cannot draft for {target.name!r}: {diff.reason}. "
            "Use a draft model with the target's tokenizer (e.g. the same model family)."
        )


def probe_pays(costs: CostModel, depth: int, lag: int, idle_steps: int, draft_cost: float, catch_cost: float,
               alpha: Sequence[float], probe_len: int, share: float) -> bool:
    """May a probe (a short draft while the plan says "draft nothing") run now?

    Its net cost, in target-token decodes: catching the draft model up over `lag` tokens
    (catch_cost each), its probe_len draft steps (draft_cost each) and the wider
    verification (t[probe_len + 1] - t[1]), less the tokens it is expected to win
    (prod alpha). It runs only when that is at most `share` of the plain decoding time of
    the idle steps since the last probe, so probing can slow generation by ~share at most.
    """
    if probe_len < 1:
        return False
    curve = costs.curve(depth)
    wins = float(np.sum(np.cumprod(np.asarray(list(alpha)[:probe_len], dtype=np.float64))))
    cost = lag * catch_cost + probe_len * draft_cost + curve.cost_at(probe_len + 1) - curve.cost_at(1) - wins
    return cost <= share * idle_steps


@dataclass(frozen=True)
class DraftTuning:
    """The knobs of `DraftModel`."""

    min_prob: float = 0.3  # stop drafting once the draft's chosen token is less likely than this
    branch_prob: float = 0.2  # with tree=True, add the second choice where the first leaves this much
    probe_every: int = 64  # steps without a draft before a probe may run
    probe_len: int = 2  # tokens a probe drafts (0: never probe)
    probe_share: float = 0.02  # the most of the idle steps' time a probe may cost

    def validate(self) -> None:
        if self.probe_every < 1 or self.probe_len < 0:
            raise ValueError(f"need probe_every >= 1 and probe_len >= 0, got {self.probe_every}, {self.probe_len}")
        for name in ("min_prob", "branch_prob", "probe_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"draft {name} must be in [0, 1], got {getattr(self, name)}")


@dataclass(frozen=True)
class DraftPlan:
    """One step's decision: tokens to draft (0: none) and the speedup over plain decoding
    expected from them, the draft's own costs counted (1.0 for a probe or no draft; NaN
    for a fixed length, which is not planned)."""

    length: int
    expected_speedup: float


class DraftModel(Proposer):
    """Draft-model speculative decoding as a `Generator` method.

    draft: a Model, a registry name or a .gguf path; None uses the target's registry pair.
    max_draft: the longest chain drafted in one step.
    length: a fixed draft length (switches the cost model off); None lets the cost model choose.
    tree: also propose the draft's second choice as a sibling where it is likely (`DraftTuning.branch_prob`).
    tuning: `DraftTuning`: when drafting stops, and the probes that run while the plan says
      "draft nothing" (probe_len tokens after at least probe_every steps, only when the
      probe, the draft's catch-up included, costs at most probe_share of those steps'
      time), so that improving acceptance is noticed without slowing generation.
    costs: a cost model to plan with instead of the target's measured one.
    draft_cost: one draft token's decode time over one target token's (default: measured
      once per model pair and device, cached on disk).
    """

    name = "draft"

    def __init__(
        self,
        draft: object = None,
        *,
        max_draft: int = 16,
        length: int | None = None,
        tree: bool = False,
        tuning: DraftTuning | None = None,
        costs: CostModel | None = None,
        draft_cost: float | None = None,
    ) -> None:
        if max_draft < 1:
            raise ValueError(f"max_draft must be >= 1, got {max_draft}")
        if length is not None and not 0 <= length <= max_draft:
            raise ValueError(f"length must be in 0..max_draft ({max_draft}), got {length}")
        self.tuning = tuning if tuning is not None else DraftTuning()
        self.tuning.validate()
        if draft is not None and not isinstance(draft, (str, os.PathLike)) and not hasattr(draft, "backend"):
            raise TypeError(f"draft must be a registry name, a .gguf path or a pyaccel.Model, got {draft!r}")
        self._draft_arg = draft
        self.max_draft = max_draft
        self.fixed_length = length
        self.tree = tree
        self._catch_cost: float | None = None  # per token, in target-token decodes (learnt)
        self.model: "Model | None" = None
        self._costs = costs
        self.draft_cost = draft_cost
        self._stats = _core.AcceptanceStats(max_draft)
        self._idle_steps = 0
        self._main_nodes: set[int] = set()
        self._probes = 0
        self._n_seq_max = 1

    # ---- set-up ---------------------------------------------------------------------------

    def bind(self, target: "Model") -> None:
        from ..model import Model

        draft = self._draft_arg
        if draft is None:
            spec = target.registry_spec
            if spec is None or spec.draft is None:
                raise ValueError(
                    f"no draft model given and {target.name!r} has no registry pair: "
                    "pass DraftModel(draft=NAME_OR_PATH) in Python, --draft-model NAME_OR_PATH on the command line"
                )
            draft = spec.draft
        self._n_seq_max = target.backend.n_seq_max
        self.model = draft if isinstance(draft, Model) else Model(draft, n_ctx=target.n_ctx,
                                                                  n_threads=target.backend.n_threads,
                                                                  amx=target.backend.config.amx)
        check_draft_vocabulary(target, self.model.backend, self.model.name)
        if self.model.n_ctx < target.n_ctx:
            warnings.warn(f"the draft model's context ({self.model.n_ctx} tokens) is smaller than the target's "
                          f"({target.n_ctx}): past it nothing is drafted; open the draft Model with "
                          f"n_ctx={target.n_ctx}", stacklevel=2)
        if self.fixed_length is None:
            if self._costs is None:
                self._costs = target.costs
            if self.draft_cost is None:
                self.draft_cost = self._costs.relative_token_cost(target.backend, self.model.backend)

    # ---- the proposer protocol ------------------------------------------------------------

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        self._sampling = sampling
        self._params = sampling_params(sampling)
        self._rng = new_rng(sampling.seed, DRAFT_SEED_SALT)

    def plan(self, tokens: list[int], budget: int) -> DraftPlan:
        """Tokens to draft this step, every cost counted: the draft's catch-up over the
        tokens it has not seen, its own steps, and the wider verification. This is the
        step's decision (a probe is counted), made once per step."""
        if self.fixed_length is not None:
            return DraftPlan(min(self.fixed_length, budget), float("nan"))
        assert self._costs is not None and self.draft_cost is not None, "DraftModel is not bound to a target"
        limit, depth = min(self.max_draft, budget), len(tokens)
        # If even a draft that is always accepted cannot clearly beat plain decoding here,
        # never draft nor probe (and never scan the history for the draft's lag).
        if limit < 1 or not self._costs.can_pay(depth, self.max_draft, self.draft_cost, CAN_PAY_MARGIN):
            return DraftPlan(0, 1.0)
        assert self.model is not None
        lag = len(tokens) - self.model.cache.common_prefix(tokens)
        catch = self._catch_per_token(depth) * lag / CATCH_UP_STEPS
        plan = self._costs.chain(self._stats.alpha(), depth, limit, self.draft_cost)
        speedup = plan.expected_tokens / (plan.expected_cost + catch) if plan.best_len > 0 else 1.0
        if plan.best_len > 0 and speedup > 1.0:
            self._idle_steps = 0
            return DraftPlan(plan.best_len, speedup)
        self._idle_steps += 1
        t = self.tuning
        if self._idle_steps >= t.probe_every and probe_pays(
                self._costs, depth, lag, self._idle_steps, self.draft_cost, self._catch_per_token(depth),
                self._stats.alpha(), min(t.probe_len, limit), t.probe_share):
            self._idle_steps = 0
            self._probes += 1
            return DraftPlan(min(t.probe_len, limit), 1.0)
        return DraftPlan(0, 1.0)

    def _catch_per_token(self, depth: int) -> float:
        """A caught-up token's cost in target-token decodes: as measured, else a draft token's
        cost at the share of a single decode that one token of the target's widest batch
        costs at `depth` (a batched prefill is that much cheaper per token on this device:
        somewhat cheaper on a small CPU, far cheaper on a GPU)."""
        assert self.draft_cost is not None and self._costs is not None
        if self._catch_cost is not None:
            return self._catch_cost
        rel = self._costs.relative_at(depth)
        return self.draft_cost * rel[-1] / len(rel)

    def _note_catch_up(self, n: int, seconds: float) -> None:
        """Learn what a caught-up token costs, relative to one target token."""
        token_s = self._costs.measured.token_s if self._costs is not None and self._costs.measured else None
        if n < 8 or token_s is None:
            return
        per_token = seconds / n / token_s
        self._catch_cost = per_token if self._catch_cost is None else 0.8 * self._catch_cost + 0.2 * per_token

    def _choose(self, row: np.ndarray) -> tuple[int, float, np.ndarray | None]:
        """Pick the draft token from one logits row: (token, its probability, q row or None)."""
        if self._sampling.greedy:
            tok = _core.argmax(row)
            z = np.exp(row - row[tok])
            return tok, float(1.0 / z.sum()), None
        q = _core.probs(row, self._params)
        tok = _core.sample_probs(q, self._rng)
        return tok, float(q[tok]), q

    def _sibling(self, row: np.ndarray, first: int, prob: float, q: np.ndarray | None) -> int | None:
        """The draft's next choice after `first`, or None where it is unlikely.

        With sampling, siblings are drawn from q without `first` (what the verifier assumes),
        and whether to branch depends only on the mass left, never on the drawn token."""
        if 1.0 - prob < self.tuning.branch_prob:
            return None
        if q is None:
            masked = row.copy()
            masked[first] = np.finfo(np.float32).min
            return _core.argmax(masked)
        rest = q.copy()
        rest[first] = 0.0
        rest /= rest.sum()
        return _core.sample_probs(rest, self._rng)

    def propose(self, tokens: list[int], budget: int) -> Draft:
        return self.draft(tokens, self.plan(tokens, budget).length)

    def candidate(self, draft: Draft) -> Candidate:
        """A chain drafted by `draft` (tree=False, greedy: no q) as a `Candidate`, each
        position with its learnt probability of acceptance (the public candidates API,
        `pyaccel.methods.candidate`)."""
        if draft.q is not None or np.any(draft.parents != np.arange(-1, len(draft) - 1)):
            raise ValueError("only a greedy chain (DraftModel(tree=False), temperature 0) merges into other "
                             "proposers' trees: verify a sampled or branched draft on its own")
        return Candidate.chain(draft.tokens, np.cumprod(self._stats.alpha()[: len(draft)]), self.name)

    def draft(self, tokens: list[int], n: int) -> Draft:
        """Run the draft model for (up to) `n` tokens after `tokens` (n from `plan`)."""
        assert self.model is not None, "DraftModel is not bound to a target"
        cache = self.model.cache
        n = min(n, self.model.n_ctx - len(tokens))  # the draft's own context may be the smaller
        if n <= 0:
            return Draft.empty()
        t0 = time.perf_counter()
        cached = cache.prefill(tokens)  # catch up: evaluates what the draft has not seen yet
        self._note_catch_up(len(tokens) - cached, time.perf_counter() - t0)
        backend = self.model.backend
        chain: list[int] = []
        parents: list[int] = []
        q_rows: dict[int, np.ndarray] = {}  # q row index (parent + 1) -> q
        tip = -1  # node index of the main chain's tip; the root is -1
        row = backend.logits_rows()[-1]
        self._main_nodes: set[int] = set()
        while len(chain) < n:
            tok, prob, q = self._choose(row)
            if q is not None:
                q_rows[tip + 1] = q
            parent = tip
            chain.append(tok)
            parents.append(parent)
            tip = len(chain) - 1
            self._main_nodes.add(tip)
            paths = 1 + sum(1 for i, par in enumerate(parents) if par != i - 1)
            if self.tree and len(chain) < n and paths < self._n_seq_max:
                sib = self._sibling(row, tok, prob, q)
                if sib is not None:
                    chain.append(sib)
                    parents.append(parent)
            if prob < self.tuning.min_prob or len(chain) >= n:
                break
            cache.append(tok)
            row = backend.logits_rows()[-1]
        return _as_draft(chain, parents, q_rows, backend.n_vocab)

    def observe(self, outcome: StepOutcome) -> None:
        if len(outcome.draft) == 0:
            return
        # Acceptance is tracked along the main chain; a kept sibling means its main node was rejected.
        # A caller verifying only part of the draft (auto) passes that part: only it is known.
        drafted = sum(1 for i in self._main_nodes if i < len(outcome.draft))
        on_main = sum(1 for i in outcome.accepted if i in self._main_nodes)
        self._stats.observe(min(drafted, self.max_draft), min(on_main, self.max_draft))

    def reset(self) -> None:
        if self.model is not None:
            self.model.cache.truncate(0)

    def close(self) -> None:
        if self.model is not None and self.model is not self._draft_arg:
            self.model.close()
            self.model = None

    def _counters(self) -> dict[str, float]:
        return {"draft_cost": self.draft_cost if self.draft_cost is not None else float("nan"),
                "catch_up_cost": (self._catch_per_token(0) if self.draft_cost is not None and self._costs is not None
                                  else float("nan")),
                "probes": self._probes}



def _as_draft(chain: list[int], parents: list[int], q_rows: dict[int, np.ndarray], n_vocab: int) -> Draft:
    tokens = np.asarray(chain, dtype=np.int32)
    par = np.asarray(parents, dtype=np.int32)
    if not q_rows:
        return Draft(tokens, par)
    # Row 0: q at the root; row j + 1: q at node j, the distribution j's children came from.
    q = np.zeros((len(chain) + 1, n_vocab), dtype=np.float32)
    for r, row in q_rows.items():
        q[r] = row
    return Draft(tokens, par, q)
