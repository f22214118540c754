"""The verification branch of lookahead: candidate continuations merged into one draft tree.

Candidates are token lists under the pending root (pool n-grams, prompt-lookup copies);
shared prefixes become one node, so k candidates of length n cost at most k * n nodes and
often far fewer. Each node counts the candidates through it (its leaves), which shares a
depth's acceptance estimate between sibling nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class CandidateTree:
    """A prefix tree of candidates: node i holds tokens[i] under parents[i] (-1 = the root);
    support[i] = candidates through node i; depth[i] >= 1."""

    tokens: np.ndarray
    parents: np.ndarray
    support: np.ndarray
    depth: np.ndarray

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def n_leaves(self) -> int:
        if not len(self):
            return 0
        has_child = np.zeros(len(self), dtype=bool)
        kids = self.parents[self.parents >= 0]
        has_child[kids] = True
        return int((~has_child).sum())


def merge_candidates(candidates: Sequence[Sequence[int]], max_leaves: int) -> CandidateTree:
    """The prefix tree of `candidates` in order (earlier ones are preferred), taking candidates
    while the tree has at most `max_leaves` leaves (each leaf is one attention sequence)."""
    tokens: list[int] = []
    parents: list[int] = []
    support: list[int] = []
    depth: list[int] = []
    children: dict[tuple[int, int], int] = {}  # (parent node, token) -> node
    inner: set[int] = set()  # nodes with children
    leaves = 0
    for cand in candidates:
        if not len(cand):
            continue
        node, new = -1, []
        for d, tok in enumerate(cand):
            key = (node, int(tok))
            if key in children:
                node = children[key]
                continue
            new = list(cand[d:])
            break
        # A candidate adds a leaf unless it ends inside the tree; it turns its attachment
        # point from a leaf into an inner node when that point had no children.
        adds_leaf = bool(new) and not (node >= 0 and node not in inner)
        if new and leaves + int(adds_leaf) > max_leaves:
            continue
        leaves += int(adds_leaf)
        path = []
        n = -1
        for tok in cand:
            key = (n, int(tok))
            if key not in children:
                children[key] = len(tokens)
                tokens.append(int(tok))
                parents.append(n)
                inner.add(n)
                support.append(0)
                depth.append(1 if n < 0 else depth[n] + 1)
            n = children[key]
            path.append(n)
        for i in path:
            support[i] += 1
    return CandidateTree(np.asarray(tokens, np.int32), np.asarray(parents, np.int32),
                         np.asarray(support, np.float64), np.asarray(depth, np.int64))


def path_probs(tree: CandidateTree, hazard: Sequence[float]) -> np.ndarray:
    """P(node accepted): the parent's, times hazard[depth - 1] (P(some candidate is right
    one token deeper)), shared among siblings by support."""
    parents, support, depth = tree.parents.tolist(), tree.support.tolist(), tree.depth.tolist()
    sibling_support: dict[int, float] = {}
    for par, s in zip(parents, support):
        sibling_support[par] = sibling_support.get(par, 0.0) + s
    h = [float(x) for x in hazard]
    out: list[float] = []
    for par, s, d in zip(parents, support, depth):
        above = 1.0 if par < 0 else out[par]
        out.append(above * h[min(d, len(h)) - 1] * s / sibling_support[par])
    return np.asarray(out, dtype=np.float64)


def matched_depth(tree: CandidateTree, committed: Sequence[int]) -> int:
    """How deep the tree matches `committed` (the tokens the pass kept, then its next token)."""
    node, d = -1, 0
    for tok in committed:
        nxt = next((i for i in range(len(tree)) if tree.parents[i] == node and tree.tokens[i] == tok), None)
        if nxt is None:
            break
        node, d = nxt, d + 1
    return d
