"""Calibration of the proposers' acceptance estimates from what verification decided.

Each proposer estimates P(node accepted) its own way (prompt lookup from context agreement,
the pool from its hit rate, a draft model from its probabilities), and on text unlike the
one its priors came from an estimate can be several times too high: on free prose prompt
lookup's short fresh matches were estimated at 0.2-0.6 and accepted 6-19% of the time, so
auto drafted where nothing paid. Every verified node is evidence about its owner's
estimates: under verification a node is accepted exactly when its whole path is, so the
sum of the verified nodes' path probabilities is the number of accepted nodes the
estimates predicted. Per proposer and band of estimate, the ratio of accepted to predicted
rescales later estimates of that band:

    R        = (accepted + w) / (predicted + w)            the proposer's, all bands
    ratio[b] = (accepted[b] + w R) / (predicted[b] + w)    band b, shrunk towards R

so a proposer found overconfident in one band is distrusted in the bands it has not been
tried in yet, instead of being trusted there afresh (on long prompts prompt lookup's
matches fall into several bands, and evidence split by band came too slowly to stop
drafts that cost 1.7 tokens' time and kept 0.3 of a token).

A ratio only ever lowers an estimate (`CalibrationTuning.max_ratio`, 1). Evidence is
gathered where a proposer drafted, and where its estimates erred low that was text it
suits: on the edit suites prompt lookup's fresh matches, mostly the start of a copy, were
accepted 2.5 times as often as predicted, and the record raised every fresh estimate by
that much, weak matches in the new code of the next prompt included (up to 4.7 times in
the lowest band). auto then drafted, mostly 3-token guesses, at 24 of the 53 steps of new
code before the copy resumed and kept 12 of the 70 tokens. An estimate too low only costs the drafts it forgoes, and each
proposer raises its own estimates where its drafts succeed (lookup from every position).

A node several proposers put at one place is verified once, and its outcome is evidence
about each of them at its own estimate. Credited to its owner alone (the one with the
largest estimate), a proposer whose right guesses mostly coincide with another's was
judged by its unshared guesses, the harder ones: the lookahead pool's, whose hits prompt
lookup mostly offered too, so the record distrusted it where it alone had a guess.
Replayed on a flat, GPU-like curve (`benchmarks/mix_curves.py`, docs/benchmarks.md) the
mix of the two went from behind lookup alone (1.319x against 1.320x over the 42 floor
prompts) to ahead of it (1.326x); on the AMD EPYC host's steep curve no pool node pays and
nothing changed.

The record carries over from call to call on the same Generator (how a proposer's
estimates err on a user's text is what transfers), fading by `decay` per step.

Evidence from verification alone starves once a proposer is distrusted: a record that
says "too high" stops the drafts that could say otherwise. Carried over from two prose
answers, the record scaled prompt lookup's fresh estimates by 0.18 through a whole
reasoning answer, and at 20 steps where lookup's own plan expected 1.2-1.9x auto drafted
nothing, so nothing corrected it (auto 1.01x, lookup alone 1.24x). So at a
step that drafts nothing, the first `shadow_depth` nodes of each offered candidate's main
chain are scored against the real tokens as they arrive (`watch`, `settle`), exactly as
verification would have counted them: right positions accepted, the first wrong one and
every node after it predicted and not accepted. Off by default (`shadow_depth` 0): on
the AMD EPYC host, timed in one run at depth 4 against 0, the floor's geometric means were
0.982x and 0.979x and the edit suites' medians 1.91x / 2.00x against 1.93x / 2.07x
(docs/benchmarks.md), so it did not earn its place as the default there. Priced on that
host's curve over 42 floor prompts it cut both ways: it won back a copy the record
distrusted (1.31x where depth 0 made 0.99x) and then followed prompt lookup's long
estimates where a paraphrase broke them after a few tokens (0.75x); 0.985x against 0.991x.

Estimates a proposer learnt itself from every position's outcome and carries from call to
call (`Candidate.learnt`: prompt lookup's copy statistics) are neither rescaled nor
recorded. Rescaling them learnt the same thing twice, and worse: nodes deep in a long copy
draft fail together when the copy breaks, so the top band of lookup's estimates (0.95+)
was rescaled to 0.7 on the edit suites, and auto drafted nothing for 23 steps of a copy
that lookup drafted 63 tokens at a time and kept whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from ... import _core
from ..candidate import Candidate, main_chain_length
from ..shadow import ShadowScorer
from .merge import MergedTree


@dataclass(frozen=True)
class CalibrationTuning:
    """Band edges of the estimates, the prior's weight (in predicted tokens), the fade
    per step of old evidence, the largest factor an estimate is scaled by (1: the
    record only ever lowers estimates) and how deep a candidate nobody drafted is scored
    against the real tokens (0: only verified nodes are evidence)."""

    edges: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 0.95)
    prior_weight: float = 2.0
    decay: float = 0.995
    max_ratio: float = 1.0
    shadow_depth: int = 0

    def validate(self) -> None:
        if list(self.edges) != sorted(self.edges) or not all(0.0 < e < 1.0 for e in self.edges):
            raise ValueError(f"calibration edges must be increasing in (0, 1), got {self.edges}")
        if self.prior_weight <= 0.0:
            raise ValueError(f"calibration prior_weight must be > 0, got {self.prior_weight}")
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"calibration decay must be in (0, 1], got {self.decay}")
        if not self.max_ratio > 0.0:
            raise ValueError(f"calibration max_ratio must be > 0, got {self.max_ratio}")
        if self.shadow_depth < 0:
            raise ValueError(f"calibration shadow_depth must be >= 0, got {self.shadow_depth}")


class Calibration:
    """Accepted versus predicted nodes per (proposer, band of estimate)."""

    def __init__(self, tuning: CalibrationTuning | None = None) -> None:
        self.tuning = tuning if tuning is not None else CalibrationTuning()
        self.tuning.validate()
        self._edges = np.asarray(self.tuning.edges, dtype=np.float64)
        # One row per source (`_rows_of`): predicted and accepted nodes per band, stored in
        # units of `_scale` (the fade since the record began), so fading every source is
        # one multiplication.
        self._row: dict[str, int] = {}
        self._predicted = np.zeros((0, len(self._edges) + 1))
        self._accepted = np.zeros((0, len(self._edges) + 1))
        self._scale = 1.0
        # Every row's ratios capped at `max_ratio`, kept until the record changes (None):
        # a step rescales its candidates and then its tree with the same table.
        self._table: npt.NDArray[np.float64] | None = None
        self._shadows = ShadowScorer()

    def _rows_of(self, sources: Sequence[str]) -> npt.NDArray[np.int32]:
        """The record's rows of `sources`; a source not seen yet gets a row without evidence."""
        new = [s for s in dict.fromkeys(sources) if s not in self._row]
        if new:
            for s in new:
                self._row[s] = len(self._row)
            grow = np.zeros((len(new), self._predicted.shape[1]))
            self._predicted = np.vstack([self._predicted, grow])
            self._accepted = np.vstack([self._accepted, grow])
            self._table = None
        return np.asarray([self._row[s] for s in sources], dtype=np.int32)

    def _ratios(self, pred: npt.NDArray[np.float64], acc: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Accepted over predicted per band (the last axis) of faded counts, each band shrunk
        towards its row's overall ratio (1 with no evidence at all)."""
        w = self.tuning.prior_weight
        overall = (acc.sum(axis=-1, keepdims=True) + w) / (pred.sum(axis=-1, keepdims=True) + w)
        return (acc + w * overall) / (pred + w)

    def ratio(self, source: str) -> npt.NDArray[np.float64]:
        """Accepted over predicted per band for `source`, each band shrunk towards the
        proposer's overall ratio (1 with no evidence at all)."""
        r = int(self._rows_of([source])[0])
        return self._ratios(self._predicted[r] * self._scale, self._accepted[r] * self._scale)

    def _capped(self) -> npt.NDArray[np.float64]:
        """Every row's ratios, each at most `max_ratio` (kept until the record changes)."""
        if self._table is None:
            ratios = self._ratios(self._predicted * self._scale, self._accepted * self._scale)
            self._table = np.minimum(ratios, self.tuning.max_ratio)
        return self._table

    def candidate(self, cand: Candidate) -> npt.NDArray[np.float64]:
        """A candidate's estimates rescaled by its owner's ratios (each at most `max_ratio`,
        the result at most 1), or as they are where they are learnt."""
        return self.candidates([cand])

    def candidates(self, cands: Sequence[Candidate]) -> npt.NDArray[np.float64]:
        """`candidate` of each of `cands`, concatenated (rescaled in one call)."""
        if not cands:
            return np.zeros(0)
        sizes = [len(c) for c in cands]
        rows = np.repeat(self._rows_of([c.source for c in cands]), sizes)
        learnt = np.repeat([c.learnt for c in cands], sizes)
        return _core.calibrate(np.concatenate([c.path_probs for c in cands]), rows, learnt, self._capped(),
                               self._edges)

    def bound(self, cand: Candidate) -> float:
        """At least the largest of `candidate(cand)`, without rescaling: ratios are at most
        `max_ratio` and estimates at most 1."""
        if not len(cand):
            return 0.0
        top = float(cand.path_probs.max())
        return top if cand.learnt else min(1.0, top * self.tuning.max_ratio)

    def apply(self, tree: MergedTree) -> npt.NDArray[np.float64]:
        """The tree's path probabilities rescaled by their owners' ratios, no node above its
        parent and siblings summing to at most their parent (`_core.calibrate_tree`)."""
        if not len(tree):
            return tree.path_probs
        rows = self._rows_of(tree.sources)
        return _core.calibrate_tree(tree.path_probs, tree.parents, tree.owner, tree.learnt, rows, self._capped(),
                                    self._edges)

    def record(self, tree: MergedTree, verified: npt.NDArray[np.int64], accepted: npt.NDArray[np.int64]) -> None:
        """Verification of tree nodes `verified` kept `accepted` (tree node ids, both); one
        step of fading first. A node is evidence about every proposer that put it there,
        each at its own estimate (at most the node's, which sibling caps may have lowered);
        learnt estimates are left out (`_core.calibration_record`)."""
        self.fade()
        if not len(verified):
            return
        rows = self._rows_of(tree.sources)
        _core.calibration_record(self._predicted, self._accepted, self._edges, tree.path_probs, tree.held,
                                 tree.held_learnt, rows, verified, accepted, self._scale)
        self._table = None

    def add(self, source: str, probs: npt.NDArray[np.float64], kept: npt.NDArray[np.float64]) -> None:
        """`probs` predicted and `kept` accepted nodes of `source`, each in its band."""
        r = int(self._rows_of([source])[0])
        bands = np.searchsorted(self._edges, probs, side="right")
        np.add.at(self._predicted[r], bands, probs / self._scale)
        np.add.at(self._accepted[r], bands, kept / self._scale)
        self._table = None

    def evidence(self, source: str) -> tuple[float, float]:
        """`source`'s predicted and accepted nodes over all bands, faded (0, 0 if none)."""
        r = self._row.get(source)
        if r is None:
            return 0.0, 0.0
        return float(self._predicted[r].sum()) * self._scale, float(self._accepted[r].sum()) * self._scale

    def watch(self, start: int, cands: list[Candidate]) -> None:
        """Candidates offered at a step that drafted nothing (their first node would be
        history position `start`): the first `shadow_depth` nodes of each one's main chain
        are scored against the real tokens as they arrive (`settle`). Learnt ones are left
        out."""
        depth = self.tuning.shadow_depth
        if not depth:
            return
        for cand in cands:
            if cand.learnt or not len(cand):
                continue
            n = min(main_chain_length(cand.parents), depth)
            self._shadows.add(start, cand.tokens[:n].tolist(), _ShadowRecord(self, cand.source, cand.path_probs[:n]))

    def settle(self, history: list[int]) -> None:
        """Score the watched chains against the committed tokens `history` (the stream)."""
        if len(self._shadows):
            self._shadows.settle(history)

    def end(self) -> None:
        """The generation ended: chains still waiting for tokens are dropped."""
        self._shadows.clear()

    def fade(self) -> None:
        """One step of fading of the old evidence (every step calls it once, through
        `record` where a tree was built)."""
        self._scale *= self.tuning.decay
        self._table = None
        if self._scale < 1e-100:  # fold the fade into the rows before it underflows
            self._predicted *= self._scale
            self._accepted *= self._scale
            self._scale = 1.0

    def summary(self) -> dict[str, float]:
        """Overall accepted / predicted per proposer (for counters)."""
        out = {}
        for source, r in self._row.items():
            total = float(self._predicted[r].sum())
            if total > 0:  # the ratio of two sums in the same units
                out[f"calibration_{source}"] = float(self._accepted[r].sum()) / total
        return out


class _ShadowRecord:
    """Where a watched chain's positions go: a right position is a predicted and
    accepted node, the first wrong one ends the chain, it and every node after it
    predicted and not accepted (as verification would have counted them)."""

    def __init__(self, calibration: Calibration, source: str, probs: npt.NDArray[np.float64]) -> None:
        self.calibration, self.source, self.probs = calibration, source, probs

    def observe_position(self, position: int, accepted: bool) -> None:
        if accepted:
            self.calibration.add(self.source, self.probs[position:position + 1], np.ones(1))
        else:
            rest = self.probs[position:]
            self.calibration.add(self.source, rest, np.zeros(len(rest)))
