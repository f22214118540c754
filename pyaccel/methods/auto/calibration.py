"""Calibration of the proposers' acceptance estimates from what verification decided.

Each proposer estimates P(node accepted) its own way (prompt lookup from context agreement,
the pool from its hit rate, a draft model from its probabilities), and on text unlike the
one its priors came from an estimate can be several times too high. Every verified node is
evidence about its owner's estimates: under verification a node is accepted exactly when
its whole path is, so the sum of the verified nodes' path probabilities is the number of
accepted nodes the estimates predicted. Per proposer and band of estimate, the ratio of
accepted to predicted rescales later estimates of that band:

    R        = (accepted + w) / (predicted + w)            the proposer's, all bands
    ratio[b] = (accepted[b] + w R) / (predicted[b] + w)    band b, shrunk towards R

so a proposer found overconfident in one band is distrusted in the bands it has not been
tried in yet. A ratio only ever lowers an estimate: evidence comes from where a proposer
drafted, text it suits, and raising its estimates from there would raise them everywhere.
A node several proposers put at one place is evidence about each of them at its own
estimate. The record carries over from call to call, fading by `decay` per step.
Estimates a proposer learnt itself from every position (`Candidate.learnt`: prompt
lookup's copy statistics) are neither rescaled nor recorded: that would learn them twice,
and a long copy's deep nodes fail together, which a per-node record reads as overconfidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from ... import _core
from ..candidate import Candidate
from .merge import MergedTree


@dataclass(frozen=True)
class CalibrationTuning:
    """The knobs of `Calibration`."""

    edges: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 0.95)  # band edges of the estimates
    prior_weight: float = 2.0  # the weight (in predicted tokens) that shrinks a band towards its proposer's ratio
    decay: float = 0.995  # the fade per step of old evidence

    def validate(self) -> None:
        if list(self.edges) != sorted(self.edges) or not all(0.0 < e < 1.0 for e in self.edges):
            raise ValueError(f"calibration edges must be increasing in (0, 1), got {self.edges}")
        if self.prior_weight <= 0.0:
            raise ValueError(f"calibration prior_weight must be > 0, got {self.prior_weight}")
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"calibration decay must be in (0, 1], got {self.decay}")


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
        # Every row's ratios capped at 1, kept until the record changes (None): a step
        # rescales its candidates and then its tree with the same table.
        self._table: npt.NDArray[np.float64] | None = None

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
        """Every row's ratios, each at most 1 (kept until the record changes)."""
        if self._table is None:
            ratios = self._ratios(self._predicted * self._scale, self._accepted * self._scale)
            self._table = np.minimum(ratios, 1.0)
        return self._table

    def candidate(self, cand: Candidate) -> npt.NDArray[np.float64]:
        """A candidate's estimates rescaled by its owner's ratios (each at most 1), or as
        they are where they are learnt."""
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
        """At least the largest of `candidate(cand)`, without rescaling: ratios are at most 1."""
        return float(cand.path_probs.max()) if len(cand) else 0.0

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

    def evidence(self, source: str) -> tuple[float, float]:
        """`source`'s predicted and accepted nodes over all bands, faded (0, 0 if none)."""
        r = self._row.get(source)
        if r is None:
            return 0.0, 0.0
        return float(self._predicted[r].sum()) * self._scale, float(self._accepted[r].sum()) * self._scale

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

