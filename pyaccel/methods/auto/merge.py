"""Candidate trees from several proposers merged into one draft tree.

Tokens that several candidates put at the same place (the same path from the root) become
one node, so a copy that prompt lookup and the lookahead pool both see costs one slot.

A node's estimate is the largest of its proposers' estimates, not 1 - prod(1 - p): the
proposers read the same text (the prompt lookup and the pool both index the prompt and the
output), so their agreement is weak extra evidence, and counting it as independent would
draft a shared guess as if it were nearly certain. The node is credited to the proposer
with that estimate (its `owner`). Children of one node are exclusive events, so where
estimates from different proposers (or a proposer's own alternatives, such as prompt
lookup's tree and the copy it follows) make siblings sum to more than their parent, the
likeliest keeps its estimate and the others share what is left, their subtrees scaled
with them (`cap_siblings`): prompt lookup ranks its own branches the same way. Scaling
every sibling down together instead turned two confident, conflicting copies (0.98 each)
into two half-likely ones, and auto drafted neither where lookup, taking its best, copied
63 tokens in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import numpy.typing as npt

from ..candidate import Candidate


@dataclass(frozen=True)
class MergedTree:
    """One prefix tree: node i holds tokens[i] under parents[i] (-1: the root), accepted with
    probability path_probs[i]; owner[i] indexes `sources` (whose estimate it carries);
    shared[i]: more than one proposer put it there; learnt[i]: its estimate is one auto takes
    as it is (`Candidate.learnt`); held[i, s]: source s's own estimate of node i (the
    largest where s put it there more than once; -1 where s did not), held_learnt[i, s]
    whether that estimate is a learnt one."""

    tokens: npt.NDArray[np.int32]
    parents: npt.NDArray[np.int32]
    path_probs: npt.NDArray[np.float64]
    owner: npt.NDArray[np.int64]
    shared: npt.NDArray[np.bool_]
    sources: tuple[str, ...]
    learnt: npt.NDArray[np.bool_]
    held: npt.NDArray[np.float64]
    held_learnt: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


@dataclass
class _Builder:
    """The tree as it grows; a node is keyed by (parent node, token)."""

    max_leaves: int
    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    owner: list[int] = field(default_factory=list)
    held: list[dict[int, tuple[float, bool]]] = field(default_factory=list)  # per node: source -> (estimate, learnt)
    has_child: list[bool] = field(default_factory=list)
    index: dict[tuple[int, int], int] = field(default_factory=dict)
    leaves: int = 0

    def add(self, parent: int, token: int, prob: float, source: int, learnt: bool) -> int | None:
        """The node for `token` under `parent` (created if it fits), or None when a new leaf
        would exceed max_leaves (each leaf is one attention sequence of the pass)."""
        node = self.index.get((parent, token))
        if node is not None:
            if prob > self.held[node].get(source, (-1.0, False))[0]:
                self.held[node][source] = (prob, learnt)
            if prob > self.probs[node]:
                self.probs[node], self.owner[node] = prob, source
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
        self.held.append({source: (prob, learnt)})
        self.has_child.append(False)
        return node


def merge_trees(candidates: Sequence[Candidate], max_leaves: int) -> MergedTree:
    """The prefix tree of `candidates`, the ones expected to add most taken first, with at
    most `max_leaves` root-to-leaf paths (a node that would add one more is left out, with
    its subtree)."""
    sources = tuple(dict.fromkeys(c.source for c in candidates))
    b = _Builder(max(0, max_leaves))
    for cand in sorted(candidates, key=lambda c: -c.expected_tokens):
        src = sources.index(cand.source)
        placed: list[int | None] = []
        for tok, par, prob in zip(cand.tokens.tolist(), cand.parents.tolist(), cand.path_probs.tolist()):
            at = -1 if par < 0 else placed[par]
            placed.append(None if at is None else b.add(at, tok, prob, src, cand.learnt))
    parents = np.asarray(b.parents, dtype=np.int32)
    held = np.full((len(b.tokens), len(sources)), -1.0)
    held_learnt = np.zeros((len(b.tokens), len(sources)), dtype=bool)
    for i, mine in enumerate(b.held):
        for src, (prob, learnt) in mine.items():
            held[i, src], held_learnt[i, src] = prob, learnt
    shared = np.count_nonzero(held >= 0.0, axis=1) > 1
    owner = np.asarray(b.owner, dtype=np.int64)
    learnt = held_learnt[np.arange(len(owner)), owner]  # the owner's estimate is the one it holds
    return MergedTree(np.asarray(b.tokens, dtype=np.int32), parents,
                      cap_siblings(parents, np.asarray(b.probs, dtype=np.float64)),
                      owner, shared, sources, learnt, held, held_learnt)


def cap_siblings(parents: npt.NDArray[np.int32], probs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """`probs` with every node's children summing to at most the node's probability (the
    root's: 1). Where they sum to more, the likeliest child keeps its estimate and each next
    one (by estimate; ties in node order, the likelier candidate's first) gets at most what
    its elder siblings left; a child cut from p to p' scales its subtree by p' / p. Parents
    come before their children."""
    n = len(probs)
    if n == 0:
        return probs
    raw = np.asarray(probs, dtype=np.float64).tolist()
    children: dict[int, list[int]] = {}
    for i, par in enumerate(parents.tolist()):
        children.setdefault(par, []).append(i)
    out = list(raw)
    scale = [1.0] * n  # each node's estimate over its raw one, passed down to its subtree
    # Parents come before their children, so in ascending order a node's own value is final
    # before its children's (the root, -1, first). Plain floats: a step's tree has tens of
    # nodes, and per-node array calls cost more than the arithmetic.
    for par in sorted(children):
        kids = children[par]
        inherited = 1.0 if par < 0 else scale[par]
        left = 1.0 if par < 0 else out[par]
        vals = [raw[k] * inherited for k in kids]
        order = range(len(kids)) if len(kids) == 1 else sorted(range(len(kids)), key=lambda j: -vals[j])
        for j in order:
            node = kids[j]
            out[node] = min(vals[j], max(left, 0.0))
            scale[node] = out[node] / raw[node] if raw[node] > 0 else 0.0
            left -= out[node]
    return np.asarray(out, dtype=np.float64)
