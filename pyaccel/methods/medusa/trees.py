"""Medusa candidate trees: which (head, rank) choices one pass verifies.

A node at depth d is one choice of head d: node (i1, ..., id) proposes head 1's rank-i1
token, then under it head 2's rank-i2 token, and so on. Heads read only the hidden state
at the tip, not the path, so each depth's choice is independent and a node's score is
the product of its choices' scores along the path:

    static   score[k][i] = rank_accuracy[k][i], the measured fraction of positions where
             head k + 1's rank-i token was right: one tree for every step, built once
             (Medusa's sparse trees)
    dynamic  score[k][i] = head k + 1's softmax probability of its rank-i token at this
             step: a tree per step (grown by path probability, as EAGLE-2)

Both keep the nodes with the largest path scores, best first, at most `max_nodes` of them
and at most `max_leaves` root-to-leaf paths (each path is one attention sequence of the
pass). A child never scores above its parent (scores are <= 1), so best-first order
always lists a parent before its children and any prefix of a tree is a tree.

    root ─┬─ (0) ─┬─ (0,0) ── (0,0,0)        parents  [-1, 0, -1, 1, 0, ...]
          │       └─ (0,1)                   head     [ 0, 1,  0, 2, 1, ...]
          └─ (1) ──── (1,0)                  rank     [ 0, 0,  1, 0, 1, ...]
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class TreeShape:
    """Nodes best first: parents[i] < i (-1: under the root); node i is rank[i] of head
    head[i] (0-based: head 0 proposes depth 1); score[i] = product of scores on its path."""

    parents: npt.NDArray[np.int32]
    head: npt.NDArray[np.int32]
    rank: npt.NDArray[np.int32]
    score: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.parents.shape[0])

    @property
    def depth(self) -> npt.NDArray[np.int32]:
        return self.head + 1

    @property
    def n_leaves(self) -> int:
        return count_leaves(self.parents)

    def tokens(self, top_ids: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        """The node tokens from the heads' ranked ids at this step (top_ids [K, k])."""
        return np.ascontiguousarray(top_ids[self.head, self.rank], dtype=np.int32)

    def prefix(self, n: int) -> "TreeShape":
        """The first n nodes (a tree: parents come first)."""
        return TreeShape(self.parents[:n], self.head[:n], self.rank[:n], self.score[:n])


def count_leaves(parents: npt.NDArray[np.int32]) -> int:
    if not len(parents):
        return 0
    inner = np.zeros(len(parents), dtype=bool)
    inner[parents[parents >= 0]] = True
    return int((~inner).sum())


def check_scores(scores: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """scores [K, k] as float64 in [0, 1]; a clear error otherwise."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] < 1 or s.shape[1] < 1:
        raise ValueError(f"tree scores must be a [heads, ranks] table with at least one entry, got shape {s.shape}")
    if not np.all(np.isfinite(s)) or s.min() < 0.0 or s.max() > 1.0:
        raise ValueError("tree scores must be probabilities in [0, 1] (rank accuracies or softmax probabilities)")
    return s


def grow_tree(scores: npt.ArrayLike, max_nodes: int, max_leaves: int) -> TreeShape:
    """The best-scoring nodes over scores [K, k] (scores[d][i]: head d + 1's rank i), taken
    best first (ties: the lexicographically smaller (rank, ...) path first) while there are
    at most `max_nodes` nodes; a node that would make more than `max_leaves` paths is passed
    over (with its subtree)."""
    s = check_scores(scores)
    if max_nodes < 0 or max_leaves < 1:
        raise ValueError(f"need max_nodes >= 0 and max_leaves >= 1, got {max_nodes}, {max_leaves}")
    n_heads, n_ranks = s.shape
    # Ranks sorted best first (a step's probabilities): a node's next sibling and its first
    # child are the only new candidates worth queueing when it is taken.
    lazy = bool(np.all(np.diff(s, axis=1) <= 0.0))
    parents: list[int] = []
    heads: list[int] = []
    ranks: list[int] = []
    negs: list[float] = []  # -score per node
    has_child: list[bool] = []
    leaves = 0
    # Heap entries: (-score, path of ranks, parent node); the path orders ties.
    frontier: list[tuple[float, tuple[int, ...], int]] = [(-float(s[0, i]), (i,), -1)
                                                          for i in range(1 if lazy else n_ranks)]
    heapq.heapify(frontier)
    while frontier and len(parents) < max_nodes:
        neg, path, parent = heapq.heappop(frontier)
        adds_leaf = parent < 0 or has_child[parent]
        if adds_leaf and leaves >= max_leaves:
            continue  # later siblings would add a leaf too: none is queued
        leaves += int(adds_leaf)
        if parent >= 0:
            has_child[parent] = True
        node = len(parents)
        parents.append(parent)
        d, r = len(path), path[-1]
        heads.append(d - 1)
        ranks.append(r)
        negs.append(neg)
        has_child.append(False)
        if lazy and r + 1 < n_ranks:
            above = negs[parent] if parent >= 0 else -1.0
            heapq.heappush(frontier, (above * float(s[d - 1, r + 1]), path[:-1] + (r + 1,), parent))
        if d < n_heads:
            for i in range(1 if lazy else n_ranks):
                heapq.heappush(frontier, (neg * float(s[d, i]), path + (i,), node))
    return TreeShape(np.asarray(parents, np.int32), np.asarray(heads, np.int32), np.asarray(ranks, np.int32),
                     -np.asarray(negs, np.float64))


def static_scores(rank_accuracy: Sequence[Sequence[float]], topk: int) -> npt.NDArray[np.float64]:
    """The static tree's score table from measured rank accuracies: [K, min(topk, ranks)]."""
    if not rank_accuracy or not all(len(r) for r in rank_accuracy):
        raise ValueError("these heads carry no measured rank accuracies, which a static tree is built from: "
                         "use tree='dynamic', or measure them with `pyaccel medusa eval`")
    n = min(topk, min(len(r) for r in rank_accuracy))
    return check_scores([list(r)[:n] for r in rank_accuracy])


def depth_sums(shape: TreeShape, probs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per depth 1..D, the sum of `probs` over the nodes at that depth: the expected chance
    that the accepted path reaches it (siblings are exclusive continuations)."""
    if not len(shape):
        return np.zeros(0)
    return np.bincount(shape.head, weights=probs, minlength=int(shape.head.max()) + 1).astype(np.float64)


def matched_depth(tokens: npt.NDArray[np.int32], parents: npt.NDArray[np.int32], stream: Sequence[int]) -> int:
    """How deep the tree follows `stream` (the real tokens after the root, in order)."""
    node, d = -1, 0
    for tok in stream:
        hit = np.flatnonzero((parents == node) & (tokens == int(tok)))
        if not len(hit):
            break
        node, d = int(hit[0]), d + 1
    return d
