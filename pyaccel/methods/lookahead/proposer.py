"""Lookahead decoding: a Jacobi window and an n-gram pool, evaluated in the same pass as the
candidates they produce.

Every pass holds the pending root, the verified branch (pool n-grams that start with the
root, merged into one tree; `candidates`) and, when the window is on, the window's cells
as auxiliary tokens (layout in csrc/lookahead.h; the step layout in pyaccel.decode). The
newest level's rows give the window's next level, and every column leaves an n-gram in
the pool. The pool is seeded with the prompt's n-grams and takes the output's as they are
committed. With the cost model on (the default) the window is used only where its
measured tau beats the cost of its pass on this device (`sizing`), and each pass verifies
the subset of candidates that pays; `cost_model=False` runs exactly the given window and
verifies up to `guesses` candidates every pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ... import _core
from ...cost_model import CostModel
from ...types import AuxTokens, Draft, SamplingConfig, StepOutcome
from ..candidate import Candidate
from ..base import Proposer
from .candidates import CandidateTree, matched_depth, merge_candidates, path_probs
from .sizing import LookaheadTuning, WindowPlan, WindowSize, plan_window

if TYPE_CHECKING:
    from ...model import Model

FIXED_DEFAULT = WindowSize(7, 5, 7)
INITS = ("prompt", "random")


class Lookahead(Proposer):
    """Lookahead decoding as a `Generator` method.

    window, ngram, guesses: W columns, n-grams of N tokens (N - 1 window levels), G
      candidates verified per pass and kept per first token in the pool. With the cost
      model on they are upper bounds (None: any measured size); with cost_model=False they
      are run exactly (defaults 7, 5, 7).
    init: the window's first guesses, "prompt" (tokens drawn from the prompt) or "random"
      (from the whole vocabulary).
    seed_pool: seed the pool with the prompt's n-grams (the output's are always added).
    lookup: also verify the prompt-lookup continuation of the text so far.
    jacobi: also verify the window's own guesses for the tokens after the root (its
      column 0), as Jacobi decoding would.
    """

    name = "lookahead"

    def __init__(self, *, window: int | None = None, ngram: int | None = None, guesses: int | None = None,
                 cost_model: bool = True, init: str = "prompt", seed_pool: bool = True, lookup: bool = False,
                 jacobi: bool = True,
                 tuning: LookaheadTuning | None = None, costs: CostModel | None = None) -> None:
        for label, value, low in (("window", window, 0), ("ngram", ngram, 3), ("guesses", guesses, 1)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise ValueError(f"lookahead {label} must be an int >= {low}, got {value!r}")
        if init not in INITS:
            raise ValueError(f"lookahead init must be one of {', '.join(INITS)}, got {init!r}")
        self.limits = (window, ngram, guesses)
        self.cost_model = bool(cost_model)
        self.init = init
        self.seed_pool = seed_pool
        self.lookup = lookup
        self.jacobi = jacobi
        self.tuning = tuning if tuning is not None else LookaheadTuning()
        self.tuning.validate()
        self._costs = costs
        self._n_seq_max = 1
        self._max_batch = 1
        self._n_ctx = 1
        self._n_vocab = 1
        self._counts: dict[str, float] = {}

    # ---- sizing ---------------------------------------------------------------------------

    def fixed_size(self) -> WindowSize:
        w, n, g = self.limits
        return WindowSize(FIXED_DEFAULT.window if w is None else w, FIXED_DEFAULT.ngram if n is None else n,
                          FIXED_DEFAULT.guesses if g is None else g)

    def plan(self, costs: CostModel, depth: int) -> WindowPlan | None:
        """The window this method would run at context `depth` on `costs` (None: no window)."""
        tuning = self.tuning
        w, n, g = self.limits
        if any(v is not None for v in self.limits):
            tuning = LookaheadTuning(**{**tuning.__dict__, "tau": {
                k: t for k, t in tuning.tau.items()
                if (w is None or k[0] <= w) and (n is None or k[1] <= n) and (g is None or k[2] <= g)}})
        extra = int(self.lookup) + int(self.jacobi)  # their candidates need a sequence each
        return plan_window(costs, depth, tuning, self._n_seq_max - extra, self._max_batch)

    def bind(self, target: "Model") -> None:
        self._n_seq_max = target.backend.n_seq_max
        self._max_batch = target.backend.max_batch
        self._n_ctx = target.n_ctx
        self._n_vocab = target.n_vocab
        if not self.cost_model:
            size = self.fixed_size()
            need = size.window + size.guesses + int(self.lookup) + int(self.jacobi and size.window > 0)
            if need > self._n_seq_max:
                raise ValueError(f"lookahead {size} needs {need} attention sequences but the model allows "
                                 f"{self._n_seq_max}: open it with pyaccel.Model(..., n_seq_max={need})")
            if size.tokens_per_pass > self._max_batch:
                raise ValueError(f"lookahead {size} evaluates up to {size.tokens_per_pass} tokens per pass but "
                                 f"the model's batch holds {self._max_batch}: open it with a larger n_batch")
        elif self._costs is None:
            self._costs = target.costs

    # ---- a generation ---------------------------------------------------------------------

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        self._rng = np.random.default_rng(0 if sampling.seed is None else sampling.seed)
        self._prompt = np.asarray(prompt, dtype=np.int32)
        self._size: WindowSize | None = None
        self._planned_at = -self.tuning.replan_every
        self._set_size(self.fixed_size() if not self.cost_model else None, self._prompt)
        self._hazard = _core.AcceptanceStats(list(self.tuning.hazard_prior), self.tuning.hazard_decay,
                                             self.tuning.hazard_prior_weight)
        self._best = self._hazard.alpha_at(0)  # `best_estimate`, kept as the hazard learns
        self._index = _core.NgramIndex(1, 4) if self.lookup else None
        if self._index is not None:
            self._index.append(self._prompt)
        self._tree: CandidateTree | None = None
        self._counts = {k: 0.0 for k in ("steps", "window_steps", "drafted", "accepted")}

    def _set_size(self, size: WindowSize | None, stream: np.ndarray) -> None:
        """Start the pool and the window for `size` (None: the pool only, sized by the
        limits); a new pool takes the n-grams of `stream` (the text so far)."""
        w, n, g = self.limits
        pool_size = size if size is not None else WindowSize(0, n or FIXED_DEFAULT.ngram, g or FIXED_DEFAULT.guesses)
        if self._size is None or (pool_size.ngram, pool_size.guesses) != (self._size.ngram, self._size.guesses):
            self._pool = _core.NgramPool(pool_size.ngram, pool_size.guesses)
            seed = stream if self.seed_pool else stream[len(self._prompt):]
            self._pool.add_stream(seed)
            self._pooled = len(stream)
        self._window = _core.JacobiWindow(pool_size.window, pool_size.ngram) if pool_size.window else None
        if self._window is not None:
            self._window.reset(self._fill(pool_size.window * pool_size.ngram))
        self._size = pool_size

    def _fill(self, n: int) -> np.ndarray:
        if self.init == "prompt" and len(self._prompt):
            return self._prompt[self._rng.integers(0, len(self._prompt), size=n)]
        return self._rng.integers(0, self._n_vocab, size=n, dtype=np.int32)

    def _replan(self, tokens: list[int]) -> None:
        depth = len(tokens)
        if not self.cost_model or depth - self._planned_at < self.tuning.replan_every:
            return
        self._planned_at = depth
        assert self._costs is not None
        plan = self.plan(self._costs, depth)
        size = plan.size if plan is not None else None
        current = self._size if self._window is not None else None
        if size != current:
            self._set_size(size, np.asarray(tokens, dtype=np.int32))

    def _take(self, tokens: list[int]) -> int:
        """Start a step on `tokens`: resize if planned, pool the output's n-grams; the root."""
        self._counts["steps"] += 1
        self._replan(tokens)
        n = self._size.ngram
        if len(tokens) - self._pooled > 0:  # the output's n-grams join the pool
            start = max(0, self._pooled - n + 1)
            self._pool.add_stream(np.asarray(tokens[start:], dtype=np.int32))
            self._pooled = len(tokens)
        if self._index is not None:
            self._index.append(np.asarray(tokens[self._index.size():], dtype=np.int32))
        self._root = int(tokens[-1])
        return self._root

    def best_estimate(self) -> float:
        """The highest P(accepted) a node of `candidates` can carry in this generation so far:
        the first position's hazard (a deeper node's is its parent's times a share of the
        next position's)."""
        return self._best

    def candidates(self, tokens: list[int], budget: int) -> list[Candidate]:
        """The verified branch alone (the pool's continuations of the root, merged), each node
        with P(accepted) from the learnt hazard: the public candidates API
        (`pyaccel.methods.candidate`), in place of `propose`. No window is evaluated or
        advanced (create the method with window=0); `observe` still learns from the step."""
        root = self._take(tokens)
        self._tree = tree = merge_candidates(self._candidates(root, self._size.ngram), self._n_seq_max)
        if not len(tree) or budget < 1:
            return []
        return [Candidate(tree.tokens, tree.parents, path_probs(tree, self._hazard.alpha()), self.name)]

    def propose(self, tokens: list[int], budget: int) -> Draft:
        root = self._take(tokens)
        n = self._size.ngram
        room = min(self._n_ctx - len(tokens), self._max_batch - 1)  # after the root, aux included
        window = self._window if self._window is not None and self._window.n_tokens < room else None
        aux = None
        if window is not None:
            window.set_root(root)
            outputs = np.zeros(window.n_tokens, dtype=bool)
            outputs[np.asarray(window.output_rows(), np.int64)] = True
            aux = AuxTokens.make(window.tokens(), window.offsets(), window.seqs(), outputs)
        seqs = self._n_seq_max - (window.width if window is not None else 0)
        room = min(budget, room - (len(aux) if aux is not None else 0))
        self._tree = tree = merge_candidates(self._candidates(root, n), max(0, seqs))
        draft = self._choose(tree, len(tokens), room, len(aux) if aux is not None else 0)
        if aux is not None:
            self._counts["window_steps"] += 1
            draft = Draft(draft.tokens, draft.parents, aux=aux)
        return draft

    def _candidates(self, root: int, n: int) -> list[list[int]]:
        cands: list[list[int]] = []
        if self._index is not None:
            tree = self._index.chain(1, 4, self.tuning.lookup_depth)
            if len(tree):
                cands.append([int(t) for t in tree.tokens])
        cands.extend(self._pool.continuations(root, self._size.guesses))
        if self.jacobi and self._window is not None and self._window.ngram > 2:
            # The window's own column 0: its guesses at offsets 1..N-2 from this root.
            cells = self._window.cells()
            cands.append([int(cells[lvl][0]) for lvl in range(1, self._window.ngram - 1)])
        return cands

    def _choose(self, tree: CandidateTree, depth: int, room: int, aux_tokens: int) -> Draft:
        """The candidates verified this pass: every one that fits (cost model off), or the
        subset whose expected tokens per cost is best, the window's tokens counted in."""
        if room <= 0 or not len(tree):
            return Draft.empty()
        if not self.cost_model:
            keep = np.arange(min(room, len(tree)))
            keep = keep[tree.parents[keep] < keep]  # prefix-closed: parents come first
            return Draft(tree.tokens[keep], tree.parents[keep])
        assert self._costs is not None
        probs = path_probs(tree, self._hazard.alpha())
        curve = self._costs.curve(depth)
        if aux_tokens:  # the window is paid anyway: plan on the curve from its size on
            times = np.asarray(curve.times)[aux_tokens:]
            if len(times) < 2:
                return Draft.empty()
            curve = _core.CostCurve(times.tolist())
        plan = _core.tree_plan(curve, probs, tree.parents, min(room, curve.measured - 1))
        if len(plan.nodes) == 0:
            return Draft.empty()
        return Draft(tree.tokens[np.asarray(plan.nodes, np.int64)], np.asarray(plan.parents, np.int32))

    def observe(self, outcome: StepOutcome) -> None:
        committed = outcome.accepted_tokens + [outcome.next_token]
        self._counts["drafted"] += len(outcome.draft)
        self._counts["accepted"] += len(outcome.accepted)
        tree = self._tree
        if tree is not None and len(tree):
            # Every candidate, verified or not, is scored against what the pass committed:
            # depth d is known right or wrong up to the committed tokens.
            m = matched_depth(tree, committed)
            for d in range(min(int(tree.depth.max()), len(committed), self._hazard.n_positions)):
                self._hazard.observe_position(d, d < m)
                if d >= m:
                    break
            self._best = self._hazard.alpha_at(0)
            if m:
                self._pool.refresh(self._root, committed[:m])
        if outcome.draft.aux is not None and self._window is not None:
            nxt = np.argmax(outcome.aux_logits, axis=1).astype(np.int32)  # the newest level's rows
            self._window.advance(nxt, len(committed), self._fill(self._window.width * self._size.ngram),
                                 self._pool)

    def end(self) -> None:
        self._tree = None

    def _counters(self) -> dict[str, Any]:
        out = dict(self._counts)
        if getattr(self, "_size", None) is not None:
            out.update(window=self._size.window if self._window is not None else 0, ngram=self._size.ngram,
                       guesses=self._size.guesses, pool=len(self._pool))
        return out
