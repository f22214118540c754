"""Prompt lookup: drafts copied from earlier in the prompt and the output, sized by cost.

Each step the suffix of the committed tokens is looked up in an incremental n-gram index
(`_core.NgramIndex`); what followed its earlier occurrences becomes a draft tree (several
continuations share their prefixes), ranked by context agreement: how many tokens before
an occurrence equal the stream's end (a copy in progress agrees over hundreds, a chance
repeat over a few). Every node gets a probability of being accepted from a hazard curve
h(k), P(the copy goes on | k tokens agree), and `_core.tree_plan` keeps the subset that
maximises expected tokens per unit of measured verification cost: long confirmed copies
become long drafts, weak matches none.

h is learnt by "shadow drafting" (`pyaccel.methods.shadow`): every step the lookup remembers
its full-depth best continuation and, once the real tokens arrive, records how far it was
right, so every position gets evidence without paying for probes. h is kept apart for a
young copy that began where one of the prompt's code blocks begins (`CopyFollower.relation`,
one `CopyStats` each). Edits the output makes to what it copies (a renamed identifier) are
learnt and applied to later drafts (`pyaccel.methods.lookup.rewrites`). Names the
instruction quotes mark where a copy is likely to break (`NamedHazard`, a factor on every
node entering one) and make an edit between two of them trusted at its first sight
(`pyaccel.methods.lookup.named`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

import numpy as np

from ... import _core
from ...cost_model import CostModel
from ...types import Draft, SamplingConfig
from ..base import Proposer
from ..candidate import Candidate
from ..shadow import ShadowScorer
from .named import NamedWords, block_openings, hazard_factors, hazard_starts
from .rewrites import FRESH, OPENING, CopyFollower
from .tuning import CONTEXT_CAP, N_BUCKETS, LookupTuning, agreement_buckets

if TYPE_CHECKING:
    from ...model import Model


class CopyStats:
    """h per agreement bucket for one relation of a match to the followed copy: a prior, a
    decay, and whether what it learnt outlives a call (`restart`)."""

    def __init__(self, prior: tuple[float, ...], decay: float, weight: float, kept: bool) -> None:
        self.prior, self.decay, self.weight, self.kept = prior, decay, weight, kept
        self._stats = self._new()

    def _new(self) -> "_core.AcceptanceStats":
        return _core.AcceptanceStats(list(self.prior), decay=self.decay, prior_weight=self.weight)

    def restart(self) -> None:
        if not self.kept:
            self._stats = self._new()

    def alpha(self) -> np.ndarray:
        return np.asarray(self._stats.alpha())

    def observe_position(self, bucket: int, accepted: bool) -> None:
        self._stats.observe_position(bucket, accepted)


def copy_stats(t: LookupTuning) -> list[CopyStats]:
    """One `CopyStats` per relation (index FRESH, OPENING): fresh matches are relearnt for
    each prompt, openings' statistics kept where `keep_copy_stats`."""
    priors = {FRESH: t.prior_fresh, OPENING: t.prior_opening}
    return [CopyStats(priors[r], t.stats_decay, t.stats_prior_weight, r != FRESH and t.keep_copy_stats)
            for r in sorted(priors)]


class NamedHazard:
    """A copy signal: P(a draft entering an occurrence of a quoted name is accepted there),
    learnt from the shadows and kept with the copy statistics, applied as a factor on the
    path probability of every node entering one (`NamedWords.occurrence`)."""

    def __init__(self, t: LookupTuning) -> None:
        self.stats = CopyStats((t.named_prior,), t.stats_decay, t.stats_prior_weight, t.keep_copy_stats)
        self.named: NamedWords | None = None

    def apply(self, probs: np.ndarray, parents: np.ndarray, positions: np.ndarray,
              n_chain: int) -> tuple[np.ndarray, dict[int, int]]:
        """`probs` of nodes copying the stream at `positions` with the hazard applied, and the
        chain positions entering an occurrence with the chain's last position in it."""
        if self.named is None or not self.named.any:
            return probs, {}
        occ = self.named.occurrence(positions)
        starts = hazard_starts(occ, parents)
        if not starts.any():
            return probs, {}
        spans = {}
        for k in np.flatnonzero(starts[:n_chain]).tolist():
            last = k
            while last + 1 < n_chain and occ[last + 1] == occ[k]:
                last += 1
            spans[k] = last
        return probs * hazard_factors(starts, parents, float(self.stats.alpha()[0])), spans


class _BucketObserver:
    """Routes a shadow's position outcomes to its relation's stats, at each position's
    agreement bucket, and the outcome of each named occurrence it drafts through whole to
    the named hazard: a failure at any of its positions, or its last position accepted."""

    def __init__(self, stats: CopyStats, buckets: np.ndarray, named: CopyStats, spans: dict[int, int]) -> None:
        self.stats, self.buckets, self.named, self.spans = stats, buckets, named, spans

    def observe_position(self, position: int, accepted: bool) -> None:
        if position < len(self.buckets):
            self.stats.observe_position(int(self.buckets[position]), accepted)
            for first, last in self.spans.items():
                if first <= position <= last and (not accepted or position == last):
                    self.named.observe_position(0, accepted)


@dataclass(frozen=True)
class _Candidates:
    """A draft tree with each node's acceptance probability, and its main chain with the
    agreement bucket of each position (what the shadow draft scores) under its relation."""

    tokens: np.ndarray
    parents: np.ndarray
    path_probs: np.ndarray
    chain: list[int]
    buckets: np.ndarray
    relation: int
    named: dict[int, int] = field(default_factory=dict)  # chain positions entering a named occurrence -> its last


class PromptLookup(Proposer):
    """Prompt-lookup decoding as a `Generator` method.

    n_min, n_max: suffix lengths matched (longest first).
    max_draft: the deepest draft; max_candidates: the most continuations in one tree.
    length: a fixed draft length (no cost model, chain only); None lets the cost model choose.
    rewrites: learn edits the output makes to what it copies (a renamed identifier) and
      draft later copies with them applied (`pyaccel.methods.lookup.rewrites`).
    tuning: the learnt-acceptance and copy-following knobs (`LookupTuning`).
    costs: a cost model to plan with instead of the target's measured one.
    """

    name = "lookup"

    def __init__(self, *, n_min: int = 1, n_max: int = 4, max_draft: int = 64, max_candidates: int = 4,
                 length: int | None = None, rewrites: bool = True, tuning: LookupTuning | None = None,
                 costs: CostModel | None = None) -> None:
        if not 1 <= n_min <= n_max:
            raise ValueError(f"need 1 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
        if max_draft < 1 or max_candidates < 1:
            raise ValueError(f"max_draft and max_candidates must be >= 1, got {max_draft} and {max_candidates}")
        if length is not None and not 0 <= length <= max_draft:
            raise ValueError(f"length must be in 0..max_draft ({max_draft}), got {length}")
        self.n_min, self.n_max = n_min, n_max
        self.max_draft = max_draft
        self.max_candidates = max_candidates
        self.fixed_length = length
        self.rewrites = rewrites
        self.tuning = tuning if tuning is not None else LookupTuning()
        self.tuning.validate()
        self._costs = costs
        self._piece: Callable[[int], bytes] | None = None  # a token's text, once bound
        self._n_seq_max = max_candidates
        self._stats = copy_stats(self.tuning)
        self._hazard = NamedHazard(self.tuning)
        self._steps = self._drafting_steps = 0

    def bind(self, target: "Model") -> None:
        self._piece = target.backend.token_bytes
        self._n_seq_max = target.backend.n_seq_max
        if self.fixed_length is None and self._costs is None:
            self._costs = target.costs

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        self._index = _core.NgramIndex(self.n_min, self.n_max)
        self._index.append(np.asarray(prompt, dtype=np.int32))
        for stats in [*self._stats, self._hazard.stats]:
            stats.restart()
        self._shadows = ShadowScorer()
        # What the prompt's text says about copies (read only where the vocabulary is known).
        pieces = [self._piece(t) for t in prompt] if self._piece is not None else None
        t = self.tuning
        named = NamedWords(pieces) if pieces is not None and (t.quoted_edits or t.named_hazard) else None
        self._named = named if named is not None and named.quoted else None
        self._hazard.named = self._named if t.named_hazard else None
        quoted = self._named is not None and t.quoted_edits
        self._follower = CopyFollower(t.min_seen, self._named_edit if quoted else None)
        if self.tuning.block_openings and pieces is not None:
            self._follower.openings = block_openings(pieces)

    def _named_edit(self, src: tuple[int, ...], out: tuple[int, ...]) -> bool:
        assert self._named is not None and self._piece is not None
        return self._named.resolve(b"".join(map(self._piece, src)), b"".join(map(self._piece, out)))

    # ---- drafting ------------------------------------------------------------------------

    def _candidates(self, tokens: list[int], tree: "_core.DraftTree") -> list[_Candidates]:
        """What could be drafted this step: the lookup tree, and the followed copy (through
        learnt edits, or where it is about to resume) when it differs from the tree's."""
        tree_tokens, parents, chain, raw_buckets, positions, ends = _core.lookup_chain(tree, N_BUCKETS)
        out: list[_Candidates] = []
        followed = None
        if self.rewrites:
            self._follower.follow(tokens)
            if ends is not None:
                self._follower.align(tokens, ends[1], ends[3])
            followed = self._follower.draft(tokens, self.max_draft)
        relation = self._follower.relation(ends[0]) if ends is not None and self.rewrites else FRESH
        if chain:
            probs = _core.lookup_path_probs(tree, self._stats[relation].alpha())
            cand = _Candidates(tree_tokens, parents, probs, chain, np.asarray(raw_buckets), relation)
            out.append(self._with_hazard(cand, positions))  # node i copies the stream at positions[i]
        if followed is not None and (ends is None or followed.tokens[:len(chain)] != chain[:len(followed.tokens)]
                                     or followed.agreement > ends[2]):
            rel = followed.relation
            buckets = agreement_buckets(followed.agreement + np.arange(len(followed.tokens)))
            cand = _Candidates(np.asarray(followed.tokens, np.int32),
                               np.arange(-1, len(followed.tokens) - 1, dtype=np.int32),
                               np.cumprod(self._stats[rel].alpha()[buckets]), followed.tokens, buckets, rel)
            out.append(self._with_hazard(cand, np.asarray(followed.positions, dtype=np.int64)))
        return out

    def _with_hazard(self, cand: _Candidates, positions: np.ndarray) -> _Candidates:
        """`cand` (its nodes copying the stream at `positions`) with the named hazard applied."""
        probs, spans = self._hazard.apply(cand.path_probs, cand.parents, positions, len(cand.chain))
        return replace(cand, path_probs=probs, named=spans) if spans else cand

    def _step_candidates(self, tokens: list[int], budget: int) -> tuple[list[_Candidates], int]:
        """This step's candidates (each shadowed, so acceptance is learnt whether or not it
        is drafted) and the deepest draft allowed."""
        self._index.append(tokens[len(self._index):])
        self._shadows.settle(tokens)
        depth = min(self.max_draft, budget)
        if self.fixed_length is not None:
            depth = min(self.fixed_length, budget)
        if depth < 1:
            return [], depth
        branches = 1 if self.fixed_length is not None else min(self.max_candidates, self._n_seq_max)
        tree = self._index.lookup(self.n_min, self.n_max, self.max_draft, branches, CONTEXT_CAP)
        cands = self._candidates(tokens, tree)
        for c in cands:
            observer = _BucketObserver(self._stats[c.relation], c.buckets, self._hazard.stats, c.named)
            self._shadows.add(len(tokens), c.chain, observer)
        return cands, depth

    def candidates(self, tokens: list[int], budget: int) -> list[Candidate]:
        """What this step could draft (the lookup tree, and the followed copy where it
        differs), each node with its probability of acceptance from the learnt hazard; the
        public candidates API (`pyaccel.methods.candidate`), in place of `propose`."""
        cands, _ = self._step_candidates(tokens, budget)
        # An opening's estimates come from statistics kept from call to call: `Candidate.learnt`.
        return [Candidate(c.tokens, c.parents, c.path_probs, self.name, c.relation != FRESH) for c in cands]

    def propose(self, tokens: list[int], budget: int) -> Draft:
        cands, depth = self._step_candidates(tokens, budget)
        if not cands:
            return Draft.empty()
        if self.fixed_length is not None:
            return Draft.chain(np.asarray(cands[-1].chain[:depth], dtype=np.int32))
        if self._costs is None:
            raise ValueError("PromptLookup needs a cost model: use it through a Generator, pass costs=, "
                             "or give a fixed length=")
        self._steps += 1
        plans = [self._costs.tree(c.path_probs, c.parents, len(tokens), budget) for c in cands]
        best = max(range(len(cands)), key=lambda k: plans[k].expected_speedup)
        cand, plan = cands[best], plans[best]
        if len(plan.nodes) == 0:  # no draft beats plain decoding
            return Draft.empty()
        self._drafting_steps += 1
        chosen = np.asarray(plan.nodes, dtype=np.int64)
        return Draft(cand.tokens[chosen], np.asarray(plan.parents, np.int32))

    # Acceptance is learnt from the shadows, which cover every position: no observe().

    def end(self) -> None:
        self._shadows.clear()

    def _counters(self) -> dict[str, float]:
        return {"planned_steps": self._steps, "drafting_steps": self._drafting_steps}
