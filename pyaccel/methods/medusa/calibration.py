"""How far a Medusa tree's path scores are from what verification keeps, learnt online.

A tree's path scores (products of rank accuracies, or of softmax probabilities) estimate
P(node accepted), but heads' errors are correlated and softmax probabilities are not
calibrated. Per depth d the tracker compares the score mass at depth d (the expected
chance that the kept path reaches d) with how often it did, and scales scores by their
ratio:

    scale[d] = (reached[d] + w) / (expected[d] + w)          (decayed sums, prior weight w)

Every tree the heads built is scored, verified or not: as the real tokens arrive, the
depth to which the whole tree follows them is what greedy verification of the whole tree
would have kept (`TreeShadows`), so evidence keeps coming while nothing is verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from .trees import TreeShape, depth_sums, matched_depth


class DepthCalibration:
    """Decayed per-depth sums of expected and reached acceptance (see the module docstring)."""

    def __init__(self, n_depths: int, decay: float, prior_weight: float) -> None:
        if n_depths < 1 or not 0.0 < decay <= 1.0 or prior_weight <= 0.0:
            raise ValueError(f"need n_depths >= 1, decay in (0, 1], prior_weight > 0; got {n_depths}, {decay}, "
                             f"{prior_weight}")
        self.decay = decay
        self.prior_weight = prior_weight
        self.expected = np.zeros(n_depths)
        self.reached = np.zeros(n_depths)
        self.observed = 0  # trees observed (a version of the scales)

    def observe(self, expected: npt.NDArray[np.float64], depth_reached: int) -> None:
        """One tree: expected[d] = its score mass at depth d + 1; the real path reached
        `depth_reached` of its depths."""
        n = min(len(expected), len(self.expected))
        self.observed += 1
        for d in range(n):
            if expected[d] <= 0.0:
                continue
            self.expected[d] = self.decay * self.expected[d] + expected[d]
            self.reached[d] = self.decay * self.reached[d] + float(depth_reached > d)

    def scale(self) -> npt.NDArray[np.float64]:
        w = self.prior_weight
        return (self.reached + w) / (self.expected + w)

    def apply(self, shape: TreeShape) -> npt.NDArray[np.float64]:
        """Calibrated P(node accepted): score times its depth's scale, capped at 1 and at the
        parent's (so best-first subsets stay optimal for the tree planner)."""
        scale = self.scale()
        d = np.minimum(shape.head, len(scale) - 1)
        p = np.minimum(shape.score * scale[d], 1.0)
        for depth in range(1, int(shape.head.max(initial=0)) + 1):  # parents are capped before children
            at = np.flatnonzero(shape.head == depth)
            p[at] = np.minimum(p[at], p[shape.parents[at]])
        return p


@dataclass
class _Pending:
    start: int  # index in the token history of the first token the tree's depth 1 predicts
    tokens: npt.NDArray[np.int32]
    parents: npt.NDArray[np.int32]
    expected: npt.NDArray[np.float64]


class TreeShadows:
    """Trees waiting for the real tokens they predicted; each is scored into a calibration
    once the history holds as many tokens after its root as the tree is deep (or its path
    has already left the tree)."""

    def __init__(self, calibration: DepthCalibration) -> None:
        self.calibration = calibration
        self._waiting: list[_Pending] = []

    def add(self, start: int, shape: TreeShape, tokens: npt.NDArray[np.int32]) -> None:
        if len(shape):
            self._waiting.append(_Pending(start, tokens, shape.parents, depth_sums(shape, shape.score)))

    def settle(self, history: Sequence[int]) -> None:
        waiting = []
        for t in self._waiting:
            known = list(history[t.start: t.start + len(t.expected)])
            m = matched_depth(t.tokens, t.parents, known)
            if m < len(known) or len(known) == len(t.expected):
                self.calibration.observe(t.expected, m)
            else:
                waiting.append(t)
        self._waiting = waiting

    def clear(self) -> None:
        self._waiting = []

    def __len__(self) -> int:
        return len(self._waiting)
