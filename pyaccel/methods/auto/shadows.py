"""Plans auto did not verify, scored against the tokens that came instead.

A plan whose estimates beat plain decoding, but not by the margin its proposers' thin
record asks for (`policy.plan_margin_for`), is not drafted; left there, the record would
never grow and the margin never fall. So the plan waits here, and as the real tokens
arrive each node is scored the way greedy verification would have scored it: accepted
exactly when every token on its path is the one that came. The result goes into the
calibration like a verified step's. Under sampling the same holds in expectation: a
drafted token is accepted with the target's probability of it, which is the probability
that it is the token sampled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from .calibration import Calibration
from .merge import MergedTree


@dataclass
class _Waiting:
    tree: MergedTree
    nodes: npt.NDArray[np.int64]  # tree node ids, parents before children
    parent_at: list[int]  # index in `nodes` of each node's parent, -1 under the root
    depth: list[int]  # 1 for a child of the root
    start: int  # history index of the first drafted token


class ShadowPlans:
    """Unverified plans waiting for their real tokens (at most `limit` at once)."""

    def __init__(self, limit: int = 32) -> None:
        self.limit = limit
        self._waiting: list[_Waiting] = []
        self.settled = 0

    def add(self, tree: MergedTree, nodes: npt.NDArray[np.int64], start: int) -> None:
        """The plan `nodes` of `tree` (prefix-closed), drafted after history[:start]."""
        if not len(nodes) or len(self._waiting) >= self.limit:
            return
        nodes = np.asarray(nodes, dtype=np.int64)
        where = {int(n): i for i, n in enumerate(nodes.tolist())}
        parent_at = [where.get(int(tree.parents[n]), -1) for n in nodes.tolist()]
        depth: list[int] = []
        for i, par in enumerate(parent_at):
            depth.append(1 if par < 0 else depth[par] + 1)
        self._waiting.append(_Waiting(tree, nodes, parent_at, depth, start))

    def settle(self, history: Sequence[int], calibration: Calibration) -> None:
        """Record every plan whose nodes the tokens in `history` now all decide."""
        waiting = []
        for plan in self._waiting:
            kept = _score(plan, history)
            if kept is None:
                waiting.append(plan)
                continue
            calibration.record(plan.tree, plan.nodes, plan.nodes[kept], fade=False)
            self.settled += 1
        self._waiting = waiting

    def clear(self) -> None:
        self._waiting = []

    def __len__(self) -> int:
        return len(self._waiting)


def _score(plan: _Waiting, history: Sequence[int]) -> npt.NDArray[np.int64] | None:
    """Indices into plan.nodes of the nodes verification would have kept, or None while a
    node on a still-matching path is deeper than the tokens known."""
    known = len(history) - plan.start
    tokens = plan.tree.tokens
    ok: list[bool] = []
    for i, n in enumerate(plan.nodes.tolist()):
        par = plan.parent_at[i]
        if par >= 0 and not ok[par]:
            ok.append(False)
            continue
        d = plan.depth[i]
        if d > known:
            return None
        ok.append(int(tokens[n]) == int(history[plan.start + d - 1]))
    return np.flatnonzero(np.asarray(ok, dtype=bool)).astype(np.int64)
