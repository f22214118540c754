"""Prompt lookup: drafts copied from earlier in the prompt and the output, sized by cost.

Each step the suffix of the committed tokens is looked up in an incremental n-gram index
(`_core.NgramIndex`); what followed its earlier occurrences becomes a draft tree (several
continuations share their prefixes), ranked by context agreement: how many tokens before
an occurrence equal the stream's end (a copy in progress agrees over hundreds, a chance
repeat over a few). Every node gets a probability of being accepted from a hazard curve
h(k), P(the copy goes on | k tokens agree), and `_core.tree_plan` keeps the subset that
maximises expected tokens per unit of measured verification cost: long confirmed copies
become long drafts, weak matches none.

h is learnt by "shadow drafting" (`pyaccel.methods.shadow`): every step the lookup remembers its
full-depth best continuation and, once the real tokens arrive, records how far it was
right, so every position gets evidence without paying for probes. h is kept apart by how
a match stands to the copy the output follows (`CopyFollower.relation`): resuming it,
elsewhere while editing it, or fresh. Edits the output makes to what it copies (a renamed
identifier) are learnt and applied to later drafts, and a copy is picked up again where
it resumes after new code (`pyaccel.methods.lookup.rewrites`). Names the instruction
quotes ("rename `h` to `heap`") mark where a copy is likely to break, with a learnt
acceptance of their own, and make an edit between two of them trusted at its first
sight (`pyaccel.methods.lookup.named`); so do the clause ends of prose, where an answer
copying text goes its own way (`pyaccel.methods.lookup.boundaries`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

import numpy as np

from ... import _core
from ...cost_model import CostModel
from ...types import Draft, SamplingConfig
from ..candidate import Candidate
from ..base import Proposer
from ..shadow import ShadowScorer
from .named import NamedWords, block_openings, hazard_factors, hazard_starts, respelled
from .boundaries import ProseBoundaries
from .rewrites import FRESH, N_RELATIONS, CopyFollower
from .tuning import N_BUCKETS, LookupTuning, agreement_buckets

if TYPE_CHECKING:
    from ...model import Model


class _Hazard:
    """h per bucket: FRESH buckets restart with every prompt, IN_LINE, AWAY and OPENING ones
    may be kept (one `_core.AcceptanceStats` each); h where a draft enters a named
    occurrence (`named`: before and after the output showed an edit of the name), h at a
    prose boundary (`boundary`: per relation) and h at a comment line end (`comment`: per
    relation), kept with the copy statistics."""

    def __init__(self, tuning: LookupTuning) -> None:
        self.tuning = tuning
        self._fresh = self._new(tuning.prior_fresh)
        self._copies = self._new(self._copy_prior(), tuning.copy_stats_decay)
        self._named = self._new((tuning.named_prior, tuning.named_prior_edited), tuning.copy_stats_decay)
        self._boundary = self._new_per_relation(tuning.boundary_prior)
        self._comment = self._new_per_relation(tuning.comment_prior)

    def _new_per_relation(self, prior: float) -> "_core.AcceptanceStats":
        return self._new((prior,) * N_RELATIONS, self.tuning.copy_stats_decay)

    def _new(self, prior: tuple[float, ...], decay: float | None = None) -> "_core.AcceptanceStats":
        return _core.AcceptanceStats(list(prior), decay=self.tuning.stats_decay if decay is None else decay,
                                     prior_weight=self.tuning.stats_prior_weight)

    def _copy_prior(self) -> tuple[float, ...]:
        """The kept buckets' prior, relation by relation from IN_LINE on (`CopyFollower.relation`)."""
        t = self.tuning
        return t.prior_in_line + t.prior_away + t.prior_opening

    def restart(self) -> None:
        if not self.tuning.keep_fresh_stats:
            self._fresh = self._new(self.tuning.prior_fresh)
        if not self.tuning.keep_copy_stats:
            self._copies = self._new(self._copy_prior(), self.tuning.copy_stats_decay)
            self._named = self._new((self.tuning.named_prior, self.tuning.named_prior_edited),
                                    self.tuning.copy_stats_decay)
            self._boundary = self._new_per_relation(self.tuning.boundary_prior)
            self._comment = self._new_per_relation(self.tuning.comment_prior)

    def alpha(self) -> list[float]:
        return list(self._fresh.alpha()) + list(self._copies.alpha())

    def relation_alpha(self, relation: int) -> np.ndarray:
        """`alpha()[N_BUCKETS * relation:][:N_BUCKETS]`: one relation's buckets."""
        if relation == FRESH:
            return self._fresh.alpha()
        return self._copies.alpha()[N_BUCKETS * (relation - 1):N_BUCKETS * relation]

    def named(self) -> np.ndarray:
        """P(a draft entering a named occurrence is accepted there), before and after the
        output showed an edit of the name."""
        return np.asarray(self._named.alpha())

    def observe_named(self, edited: bool, accepted: bool) -> None:
        self._named.observe_position(int(edited), accepted)

    def boundary(self, relation: int) -> float:
        """P(a copy of this relation goes on at a prose boundary)."""
        return float(self._boundary.alpha()[relation])

    def observe_boundary(self, relation: int, accepted: bool) -> None:
        self._boundary.observe_position(relation, accepted)

    def comment(self, relation: int) -> float:
        """P(a copy of this relation goes on at a comment line end)."""
        return float(self._comment.alpha()[relation])

    def observe_comment(self, relation: int, accepted: bool) -> None:
        self._comment.observe_position(relation, accepted)

    def observe_position(self, bucket: int, accepted: bool) -> None:
        if bucket < N_BUCKETS:
            self._fresh.observe_position(bucket, accepted)
        else:
            self._copies.observe_position(bucket - N_BUCKETS, accepted)


class _BucketObserver:
    """Routes a shadow's position outcomes to the bucket of that position's agreement (at a
    prose boundary or a comment line end: to that hazard of the draft's relation too), and the
    outcome of each named occurrence it drafts through whole to the named hazard: a
    failure at any of its positions, or its last position accepted (an occurrence of
    `enterabs` renamed `enter_absolute` shares its first token with the new name)."""

    def __init__(self, stats: "_Hazard", buckets: list[int],
                 named: dict[int, tuple[int, bool]] | None = None, boundaries: frozenset[int] = frozenset(),
                 comment_ends: frozenset[int] = frozenset()) -> None:
        self.stats, self.buckets, self.named, self.boundaries = stats, buckets, named or {}, boundaries
        self.comment_ends = comment_ends

    def observe_position(self, position: int, accepted: bool) -> None:
        if position < len(self.buckets):
            self.stats.observe_position(self.buckets[position], accepted)
            if position in self.boundaries:
                self.stats.observe_boundary(self.buckets[0] // N_BUCKETS, accepted)
            if position in self.comment_ends:
                self.stats.observe_comment(self.buckets[0] // N_BUCKETS, accepted)
            for first, (last, edited) in self.named.items():
                if first <= position <= last and (not accepted or position == last):
                    self.stats.observe_named(edited, accepted)


@dataclass(frozen=True)
class _Candidates:
    """A draft tree with each node's acceptance probability, and its main chain with the
    agreement bucket of each position (what the shadow draft scores)."""

    tokens: np.ndarray
    parents: np.ndarray
    path_probs: np.ndarray
    chain: list[int]
    buckets: list[int]
    # Chain positions entering a named occurrence: the chain's last position in it, and has
    # the output shown an edit of its name?
    named: dict[int, tuple[int, bool]] = field(default_factory=dict)
    # Chain positions copying a prose boundary, and a comment line end.
    boundaries: frozenset[int] = frozenset()
    comment_ends: frozenset[int] = frozenset()
    # Does a node copy the end of the opening line of one of the prompt's code blocks?
    enters_block: bool = False

    @property
    def learnt(self) -> bool:
        """Estimated from the copy statistics, kept from call to call (`_Hazard`: buckets past
        the fresh ones, which restart with every prompt)."""
        return self.buckets[0] >= N_BUCKETS


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
        self._tokenize: Callable[[str], list[int]] | None = None  # text to tokens (no BOS), once bound
        self._named: NamedWords | None = None
        self._n_seq_max = max_candidates
        self._stats = _Hazard(self.tuning)
        self._steps = self._drafting_steps = 0

    def bind(self, target: "Model") -> None:
        backend = target.backend
        self._piece = backend.token_bytes
        self._tokenize = lambda text: backend.tokenize(text, add_special=False, parse_special=False)
        self._n_seq_max = target.backend.n_seq_max
        if self.fixed_length is None and self._costs is None:
            self._costs = target.costs

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        self._index = _core.NgramIndex(self.n_min, self.n_max)
        self._index.append(np.asarray(prompt, dtype=np.int32))
        # P(next token still copies | k tokens agreed so far), per relation and bucket of k.
        self._stats.restart()
        self._shadows = ShadowScorer()
        # What the prompt's text says about copies (read only where the vocabulary is known).
        pieces = [self._piece(t) for t in prompt] if self._piece is not None else None
        self._prompt, self._pieces = prompt, pieces
        self._respelled: set[bytes] = set()
        self._named = self._quoted_names(pieces)
        named_edit = None
        if self._named is not None and self.tuning.quoted_edits:
            named_edit = self._named_edit
        self._follower = CopyFollower(self.tuning.follower, named_edit)
        if self.tuning.block_openings and pieces is not None:
            self._follower.openings = block_openings(pieces)
        # The same stream indices as an array, for `_with_entry`'s test of every step's nodes.
        self._opening_ids = np.fromiter(sorted(self._follower.openings), dtype=np.int64)
        self._boundaries: ProseBoundaries | None = None
        if (self.tuning.boundary_hazard or self.tuning.comment_hazard) and pieces is not None:
            self._boundaries = ProseBoundaries()
            self._boundaries.extend(pieces)

    def _quoted_names(self, pieces: list[bytes] | None) -> NamedWords | None:
        """The names the prompt (its tokens' `pieces`) quotes; None where it quotes none."""
        if pieces is None or not (self.tuning.quoted_edits or self.tuning.named_hazard):
            return None
        named = NamedWords(pieces, self.tuning.hazard_after_edit)
        return named if named.quoted else None

    def _named_edit(self, src: tuple[int, ...], out: tuple[int, ...]) -> bool:
        assert self._named is not None and self._piece is not None
        hit = self._named.resolve(b"".join(map(self._piece, src)), b"".join(map(self._piece, out)))
        if hit and self.tuning.respell_renames:
            self._respell_renamed()
        return hit

    def _respell_renamed(self) -> None:
        """Trust, for each prompt occurrence of a name the output has renamed, its tokens
        respelled with the new name and re-tokenized (`CopyFollower.trust`)."""
        assert self._named is not None and self._pieces is not None
        if self._tokenize is None:
            return
        for old, new in self._named.renames.items():
            if old in self._respelled:
                continue
            self._respelled.add(old)
            for first, last in self._named.occurrences(old):
                text = b"".join(self._pieces[first:last + 1])
                try:
                    spelt = respelled(text, old, new).decode("utf-8")
                except UnicodeDecodeError:  # the span cuts a character: leave it to learnt edits
                    continue
                self._follower.trust(tuple(self._prompt[first:last + 1]), tuple(self._tokenize(spelt)))

    # ---- drafting ------------------------------------------------------------------------

    def _path_probs(self, tree: "_core.DraftTree", offset: int) -> np.ndarray:
        """P(node accepted) = P(parent accepted) * P(node | parent accepted).

        The best-ranked child of a node (the first in node order) continues the occurrence
        with the longest context agreement k: it is accepted with the measured hazard
        h(k + depth) of its agreement bucket. Every other child shares the rest, 1 - h, by
        its support among all the children (`_core.lookup_path_probs`)."""
        return _core.lookup_path_probs(tree, self._stats.relation_alpha(offset // N_BUCKETS))

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
            offset = N_BUCKETS * relation
            buckets = [offset + b for b in raw_buckets]
            cand = _Candidates(tree_tokens, parents, self._path_probs(tree, offset), chain, buckets)
            if self._named_active() or self._boundaries is not None:
                cand = self._with_hazards(cand, positions)  # node i copies the stream at positions[i]
            out.append(self._with_entry(cand, positions))
        if followed is not None and (ends is None or followed.tokens[:len(chain)] != chain[:len(followed.tokens)]
                                     or followed.agreement > ends[2]):
            offset = N_BUCKETS * followed.relation
            buckets = (offset + agreement_buckets(followed.agreement + np.arange(len(followed.tokens)))).tolist()
            cand = _Candidates(np.asarray(followed.tokens, np.int32),
                               np.arange(-1, len(followed.tokens) - 1, dtype=np.int32),
                               np.cumprod(np.asarray(self._stats.alpha())[buckets]), followed.tokens, buckets)
            positions = np.asarray(followed.positions, dtype=np.int64)
            out.append(self._with_entry(self._with_hazards(cand, positions), positions))
        return out

    def _with_entry(self, cand: _Candidates, positions: np.ndarray) -> _Candidates:
        """`cand` flagged where a node of it (copying the stream at `positions`) copies the
        end of a code block's opening line: the answer is about to open a block as the
        prompt does, and the next step would draft its first line from the opening
        statistics (`Candidate.probe`)."""
        if not len(self._opening_ids) or not len(positions):
            return cand
        return replace(cand, enters_block=True) if np.isin(positions, self._opening_ids).any() else cand

    def _named_active(self) -> bool:
        """Does the prompt still mark named occurrences to weigh drafts by?"""
        return self._named is not None and self.tuning.named_hazard and self._named.any

    def _with_hazards(self, cand: _Candidates, positions: np.ndarray) -> _Candidates:
        """`cand` (its nodes copying the stream at `positions`) with the named and the
        prose-boundary hazards applied where they are on."""
        if self._named_active():
            cand = self._with_named(cand, positions)
        if self._boundaries is not None:
            cand = self._with_boundaries(cand, positions)
        return cand

    def _with_boundaries(self, cand: _Candidates, positions: np.ndarray) -> _Candidates:
        """`cand` with the boundary hazard of its relation applied at every node copying a
        prose boundary, and the comment hazard at every node copying a comment line end
        (each where it is on), and the chain positions that do noted for its shadow."""
        assert self._boundaries is not None
        relation = cand.buckets[0] // N_BUCKETS
        if self.tuning.boundary_hazard:
            hit = _core.tree_flagged_products(cand.parents, positions, cand.path_probs, self._boundaries.flags,
                                              self._stats.boundary(relation), len(cand.chain))
            if hit is not None:
                cand = replace(cand, path_probs=hit[0], boundaries=frozenset(hit[1]))
        if self.tuning.comment_hazard:
            hit = _core.tree_flagged_products(cand.parents, positions, cand.path_probs,
                                              self._boundaries.comment_flags, self._stats.comment(relation),
                                              len(cand.chain))
            if hit is not None:
                cand = replace(cand, path_probs=hit[0], comment_ends=frozenset(hit[1]))
        return cand

    def _with_named(self, cand: _Candidates, positions: np.ndarray) -> _Candidates:
        """`cand` with the named hazard applied where its nodes (copying the stream at
        `positions`) enter a named occurrence, and the chain positions that do noted for
        its shadow."""
        assert self._named is not None
        occ = self._named.occurrence(positions)
        starts = hazard_starts(occ, cand.parents)
        if not starts.any():
            return cand
        edited = self._named.resolved(occ)
        probs = cand.path_probs * hazard_factors(starts, cand.parents, self._stats.named()[edited.astype(np.int64)])
        n = len(cand.chain)
        on_chain = {}
        for k in np.flatnonzero(starts[:n]):
            last = int(k)
            while last + 1 < n and occ[last + 1] == occ[k]:
                last += 1
            on_chain[int(k)] = (last, bool(edited[k]))
        return replace(cand, path_probs=probs, named=on_chain)

    def _step_candidates(self, tokens: list[int], budget: int) -> tuple[list[_Candidates], int]:
        """This step's candidates (each shadowed, so acceptance is learnt whether or not it
        is drafted) and the deepest draft allowed."""
        self._index.append(tokens[len(self._index):])
        if self._boundaries is not None and self._piece is not None:
            self._boundaries.extend([self._piece(t) for t in tokens[len(self._boundaries):]])
        self._shadows.settle(tokens)
        depth = min(self.max_draft, budget)
        if self.fixed_length is not None:
            depth = min(self.fixed_length, budget)
        if depth < 1:
            return [], depth
        branches = 1 if self.fixed_length is not None else min(self.max_candidates, self._n_seq_max)
        tree = self._index.lookup(self.n_min, self.n_max, self.max_draft, branches, self.tuning.context_cap)
        cands = self._candidates(tokens, tree)
        for c in cands:
            self._shadows.add(len(tokens), c.chain,
                              _BucketObserver(self._stats, c.buckets, c.named, c.boundaries, c.comment_ends))
        return cands, depth

    def candidates(self, tokens: list[int], budget: int) -> list[Candidate]:
        """What this step could draft (the lookup tree, and the followed copy where it
        differs), each node with its probability of acceptance from the learnt hazard; the
        public candidates API (`pyaccel.methods.candidate`), in place of `propose`."""
        cands, _ = self._step_candidates(tokens, budget)
        return [Candidate(c.tokens, c.parents, c.path_probs, self.name, c.learnt, c.enters_block) for c in cands]

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
