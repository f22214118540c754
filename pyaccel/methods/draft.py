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

import numpy as np

from . import _core
from .costs import decode_costs, measure_decode_costs
from .decode import TargetCache, _sampling_params
from .errors import IncompatibleModelsError
from .backend import compare_vocabularies
from .types import Draft, SamplingConfig

# Steps between forced short drafts when the plan says "draft nothing", so that improving
# acceptance (a copy-heavy stretch) is noticed.
PROBE_EVERY = 64
PROBE_LEN = 2


class DraftModel:
    """Draft-model speculative decoding as a `Generator` method.

    draft: a Model, a registry name or a .gguf path; None uses the target's registry pair.
    max_draft: the longest chain drafted in one step.
    min_prob: stop drafting once the draft's chosen token has probability below this.
    length: a fixed draft length (switches the cost model off); None lets the cost model choose.
    tree: also propose the draft's second choice as a sibling where its probability >= branch_prob.
    """

    name = "draft"

    def __init__(
        self,
        draft: object = None,
        *,
        max_draft: int = 16,
        min_prob: float = 0.3,
        length: int | None = None,
        tree: bool = False,
        branch_prob: float = 0.2,
        progress: bool = True,
    ) -> None:
        if max_draft < 1:
            raise ValueError(f"max_draft must be >= 1, got {max_draft}")
        if length is not None and not 0 <= length <= max_draft:
            raise ValueError(f"length must be in 0..max_draft ({max_draft}), got {length}")
        self._draft_arg = draft
        self.max_draft = max_draft
        self.min_prob = min_prob
        self.fixed_length = length
        self.tree = tree
        self.branch_prob = branch_prob
        self.progress = progress
        self.model = None
        self._stats = _core.AcceptanceStats(max_draft)
        self._idle_steps = 0
        self._main_nodes: set[int] = set()
        self.can_pay = True
        self.last_plan: "_core.ChainPlan | None" = None

    # ---- set-up ---------------------------------------------------------------------------

    def bind(self, target: "Model") -> None:  # noqa: F821 - Model is imported lazily below
        from .api import Model

        draft = self._draft_arg
        if draft is None:
            spec = target.registry_spec
            if spec is None or spec.draft is None:
                raise ValueError(
                    f"no draft model given and {target.name!r} has no registry pair: "
                    "pass DraftModel(draft=NAME_OR_PATH)"
                )
            draft = spec.draft
        self.model = draft if isinstance(draft, Model) else Model(draft, n_ctx=target.n_ctx,
                                                                  n_threads=target.backend.n_threads)
        diff = compare_vocabularies(target.backend, self.model.backend)
        if not diff.ok:
            raise IncompatibleModelsError(
                f"{self.model.name!r} cannot draft for {target.name!r}: {diff.reason}. "
                "Use a draft model with the target's tokenizer (e.g. the same model family)."
            )
        self._cache = TargetCache(self.model.backend)
        self._target = target
        if self.fixed_length is None:
            target_costs = decode_costs(target.backend, progress=self.progress)
            draft_token_s = measure_decode_costs(self.model.backend, max_batch=1, repeats=5,
                                                 progress=False, deep=False).token_s
            self.set_cost(target_costs.curve(), draft_token_s / target_costs.token_s)

    def set_cost(self, curve: "_core.CostCurve", draft_cost: float) -> None:
        """Use a given cost curve and relative draft-token cost (to study other devices)."""
        self._curve, self.draft_cost = curve, draft_cost
        # If even a draft that is always accepted cannot beat plain decoding here, never
        # draft nor probe: catching the draft up alone would cost more than it could win.
        perfect = _core.chain_plan(curve, [1.0] * self.max_draft, draft_cost, self.max_draft)
        self.can_pay = perfect.best_len > 0

    # ---- the proposer protocol ------------------------------------------------------------

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        self._sampling = sampling
        self._params = _sampling_params(sampling)
        self._rng = _core.Rng(sampling.seed ^ 0x5DEECE66D if sampling.seed is not None
                              else int.from_bytes(os.urandom(8), "little") >> 1)

    def _plan_length(self, budget: int) -> int:
        if self.fixed_length is not None:
            return min(self.fixed_length, budget)
        limit = min(self.max_draft, budget)
        if not self.can_pay:
            return 0
        plan = _core.chain_plan(self._curve, self._stats.alpha(), self.draft_cost, limit)
        self.last_plan = plan
        if plan.best_len > 0:
            self._idle_steps = 0
            return plan.best_len
        self._idle_steps += 1
        if self._idle_steps >= PROBE_EVERY:
            self._idle_steps = 0
            return min(PROBE_LEN, limit)
        return 0

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
        if 1.0 - prob < self.branch_prob:
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
        n = self._plan_length(budget)
        if n == 0:
            return Draft.empty()
        self._cache.prefill(tokens)  # catch up: evaluates what the draft has not seen yet
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
            if self.tree and len(chain) < n and paths < backend.n_seq_max:
                sib = self._sibling(row, tok, prob, q)
                if sib is not None:
                    chain.append(sib)
                    parents.append(parent)
            if prob < self.min_prob or len(chain) >= n:
                break
            backend.decode([tok], [len(self._cache.tokens)])
            self._cache.tokens.append(tok)
            row = backend.logits_rows()[-1]
        return _as_draft(chain, parents, q_rows, backend.n_vocab)

    def observe(self, draft: Draft, accepted: list[int], next_token: int) -> None:
        if len(draft) == 0:
            return
        # Acceptance is tracked along the main chain; a kept sibling means its main node was rejected.
        on_main = sum(1 for i in accepted if i in self._main_nodes)
        self._stats.observe(min(len(self._main_nodes), self.max_draft), min(on_main, self.max_draft))

    def end(self) -> None:
        pass

    def close(self) -> None:
        if self.model is not None and self.model is not self._draft_arg:
            self.model.close()


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
