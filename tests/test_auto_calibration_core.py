"""auto's calibration arithmetic in the C++ core (`_core.calibrate`, `calibrate_tree`,
`calibration_record`, reached through `Calibration`) against the rule written out in plain
Python, per source and node, on random merged trees with several sources, learnt estimates
and fading."""

from __future__ import annotations

import numpy as np
import pytest

from pyaccel import _core
from pyaccel.methods.auto.calibration import Calibration, CalibrationTuning
from pyaccel.methods.auto.merge import MergedTree, merge_trees

from test_auto_merge import _random_candidates

EDGES = CalibrationTuning().edges


def _band(p: float) -> int:
    return sum(1 for e in EDGES if e <= p)


class _Reference:
    """The record as dictionaries of per-band lists, counts faded at every step."""

    def __init__(self, tuning: CalibrationTuning) -> None:
        self.tuning = tuning
        self.pred: dict[str, list[float]] = {}
        self.acc: dict[str, list[float]] = {}

    def rows(self, source: str) -> tuple[list[float], list[float]]:
        return (self.pred.setdefault(source, [0.0] * (len(EDGES) + 1)),
                self.acc.setdefault(source, [0.0] * (len(EDGES) + 1)))

    def record(self, tree: MergedTree, verified: list[int], accepted: set[int]) -> None:
        for source in self.pred:
            self.pred[source] = [x * self.tuning.decay for x in self.pred[source]]
            self.acc[source] = [x * self.tuning.decay for x in self.acc[source]]
        for v in verified:
            for s, source in enumerate(tree.sources):
                est = float(tree.held[v, s])
                if est < 0.0 or tree.held_learnt[v, s]:
                    continue
                p = min(est, float(tree.path_probs[v]))
                pred, acc = self.rows(source)
                pred[_band(p)] += p
                acc[_band(p)] += 1.0 if v in accepted else 0.0

    def factor(self, source: str, p: float) -> float:
        pred, acc = self.rows(source)
        w = self.tuning.prior_weight
        overall = (sum(acc) + w) / (sum(pred) + w)
        return min((acc[_band(p)] + w * overall) / (pred[_band(p)] + w), 1.0)

    def scaled(self, source: str, p: float, learnt: bool) -> float:
        return p if learnt else min(1.0, p * self.factor(source, p))

    def apply(self, tree: MergedTree) -> list[float]:
        probs = [self.scaled(tree.sources[int(tree.owner[i])], float(tree.path_probs[i]), bool(tree.learnt[i]))
                 for i in range(len(tree))]
        for i, par in enumerate(tree.parents.tolist()):  # parents come first
            if par >= 0:
                probs[i] = min(probs[i], probs[par])
        return _core.tree_cap_siblings(tree.parents, np.array(probs)).tolist() if probs else []


def test_the_calibration_matches_the_rule_on_random_trees() -> None:
    tuning = CalibrationTuning(decay=0.97)
    cal, ref = Calibration(tuning), _Reference(tuning)
    rng = np.random.default_rng(5)
    for step in range(400):
        cands = [c for c in _random_candidates(rng) if len(c)]
        if not cands:
            continue
        tree = merge_trees(cands, int(rng.integers(1, 10)))
        np.testing.assert_allclose(cal.apply(tree), ref.apply(tree), rtol=1e-12, atol=1e-15)
        want = [ref.scaled(c.source, float(p), c.learnt) for c in cands for p in c.path_probs]
        np.testing.assert_allclose(cal.candidates(cands), want, rtol=1e-12, atol=1e-15)
        verified = sorted(int(v) for v in np.flatnonzero(rng.random(len(tree)) < 0.5))
        accepted = {v for v in verified if rng.random() < 0.4}
        cal.record(tree, np.array(verified, np.int64), np.array(sorted(accepted), np.int64))
        ref.record(tree, verified, accepted)
        for source in ref.pred:
            assert cal.evidence(source) == pytest.approx((sum(ref.pred[source]), sum(ref.acc[source])), rel=1e-9)


def test_no_candidates_rescale_to_nothing() -> None:
    assert Calibration().candidates([]).shape == (0,)


def test_the_core_rejects_malformed_calibration_input() -> None:
    table, edges = np.ones((2, 3)), np.array([0.3, 0.6])
    probs, rows, keep = np.array([0.5, 0.9]), np.array([0, 1], np.int32), np.zeros(2, np.bool_)
    assert _core.calibrate(probs, rows, keep, table, edges).tolist() == [0.5, 0.9]
    with pytest.raises(ValueError, match="row 2 outside"):
        _core.calibrate(probs, np.array([0, 2], np.int32), keep, table, edges)
    with pytest.raises(ValueError, match="bands"):
        _core.calibrate(probs, rows, keep, np.ones((2, 2)), edges)
    with pytest.raises(ValueError, match="owner 3 outside"):
        _core.calibrate_tree(probs, [-1, 0], np.array([0, 3], np.int32), keep, rows, table, edges)
    with pytest.raises(ValueError, match="parents"):
        _core.calibrate_tree(probs, [-1, 1], np.array([0, 1], np.int32), keep, rows, table, edges)
    held, flags = np.full((2, 2), 0.5), np.zeros((2, 2), np.bool_)
    nodes = np.array([0, 1], np.int64)
    with pytest.raises(ValueError, match="verified node 5"):
        _core.calibration_record(np.zeros((2, 3)), np.zeros((2, 3)), edges, probs, held, flags, rows,
                                 np.array([5], np.int64), nodes[:0], 1.0)
    with pytest.raises(TypeError):  # the record is written in place: never a converted copy
        _core.calibration_record(np.zeros((2, 3), np.float32), np.zeros((2, 3)), edges, probs, held, flags, rows,
                                 nodes, nodes[:0], 1.0)
