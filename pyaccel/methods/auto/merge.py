"""Candidate trees from several proposers merged into one draft tree.

Tokens that several candidates put at the same place (the same path from the root) become
one node, so a copy that prompt lookup and the lookahead pool both see costs one slot.

A node's estimate is the largest of its proposers' estimates, not 1 - prod(1 - p): the
proposers read the same text (the prompt lookup and the pool both index the prompt and the
output), so their agreement is weak extra evidence, and counting it as independent would
draft a shared guess as if it were nearly certain. The node is credited to the proposer
with that estimate (its `owner`). Children of one node are exclusive events, so where
estimates from different proposers make siblings sum to more than their parent, the
siblings' subtrees are scaled down together (`cap_siblings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from ..candidate import Candidate


@dataclass(frozen=True)
class MergedTree:
    """One prefix tree: node i holds tokens[i] under parents[i] (-1: the root), accepted with
    probability path_probs[i]; owner[i] indexes `sources` (whose estimate it carries);
    shared[i]: more than one proposer put it there."""

    tokens: npt.NDArray[np.int32]
    parents: npt.NDArray[np.int32]
    path_probs: npt.NDArray[np.float64]
    owner: npt.NDArray[np.int64]
    shared: npt.NDArray[np.bool_]
    sources: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


@dataclass
class _Builder:
    """The tree as it grows; a node is keyed by (parent node, token)."""

    max_leaves: int
    tokens: list[int]
    parents: list[int]
    probs: list[float]
    owner: list[int]
    holders: list[int]  # bit s: source s put the node there
    has_child: list[bool]
    index: dict[tuple[int, int], int]
    leaves: int = 0

    def add(self, parent: int, token: int, prob: float, source: int) -> int | None:
        """The node for `token` under `parent` (created if it fits), or None when a new leaf
        would exceed max_leaves (each leaf is one attention sequence of the pass)."""
        node = self.index.get((parent, token))
        if node is not None:
            if prob > self.probs[node]:
                self.probs[node], self.owner[node] = prob, source
            self.holders[node] |= 1 << source
            return node
        # A child of the root or of a node with children is a new path; a first child
        # extends its parent's path.
        new_leaf = parent < 0 or self.has_child[parent]
        if new_leaf and self.leaves >= self.max_leaves:
            return None
        self.leaves += int(new_leaf)
        if parent >= 0:
            self.has_child[parent] = True
        node = len(self.tokens)
        self.index[(parent, token)] = node
        self.tokens.append(token)
        self.parents.append(parent)
        self.probs.append(prob)
        self.owner.append(source)
        self.holders.append(1 << source)
        self.has_child.append(False)
        return node


def merge_trees(candidates: Sequence[Candidate], max_leaves: int) -> MergedTree:
    """The prefix tree of `candidates`, the ones expected to add most taken first, with at
    most `max_leaves` root-to-leaf paths (a node that would add one more is left out, with
    its subtree)."""
    sources = tuple(dict.fromkeys(c.source for c in candidates))
    b = _Builder(max(0, max_leaves), [], [], [], [], [], [], {})
    for cand in sorted(candidates, key=lambda c: -c.expected_tokens):
        src = sources.index(cand.source)
        placed: list[int | None] = []
        for tok, par, prob in zip(cand.tokens.tolist(), cand.parents.tolist(), cand.path_probs.tolist()):
            at = -1 if par < 0 else placed[par]
            placed.append(None if at is None else b.add(at, tok, prob, src))
    parents = np.asarray(b.parents, dtype=np.int32)
    shared = np.asarray([h & (h - 1) != 0 for h in b.holders], dtype=bool)  # more than one bit set
    return MergedTree(np.asarray(b.tokens, dtype=np.int32), parents,
                      cap_siblings(parents, np.asarray(b.probs, dtype=np.float64)),
                      np.asarray(b.owner, dtype=np.int64), shared, sources)


def cap_siblings(parents: npt.NDArray[np.int32], probs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """`probs` with every node's children summing to at most the node's probability (the
    root's: 1): where they sum to more, the children and their subtrees are scaled by one
    factor. Parents come before their children."""
    n = len(probs)
    if n == 0:
        return probs
    child_sum = np.zeros(n + 1)  # index parent + 1 (0: the root)
    np.add.at(child_sum, parents.astype(np.int64) + 1, probs)
    own = np.concatenate(([1.0], probs))
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = np.where(child_sum > own, own / child_sum, 1.0)  # factor for the children of each
    scale = np.empty(n)
    for i, par in enumerate(parents.tolist()):
        scale[i] = cap[par + 1] * (1.0 if par < 0 else scale[par])
    return probs * scale
