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
every sibling down together instead would turn two confident, conflicting copies into two
half-likely ones, and neither would be drafted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from ... import _core
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


def merge_trees(candidates: Sequence[Candidate], max_leaves: int) -> MergedTree:
    """The prefix tree of `candidates`, the ones expected to add most taken first, with at
    most `max_leaves` root-to-leaf paths (a node that would add one more is left out, with
    its subtree). The placing is `_core.tree_merge`'s: a node keyed by (parent, token), its
    estimate the largest any candidate gave it, credited to the first source that gave it."""
    sources = tuple(dict.fromkeys(c.source for c in candidates))
    ordered = sorted(candidates, key=lambda c: -c.expected_tokens)
    tokens, parents, probs, owner, held, held_learnt = _core.tree_merge(
        [(c.tokens, c.parents, c.path_probs, sources.index(c.source), c.learnt) for c in ordered],
        len(sources), max_leaves)
    shared = np.count_nonzero(held >= 0.0, axis=1) > 1
    owner = owner.astype(np.int64)
    learnt = held_learnt[np.arange(len(owner)), owner]  # the owner's estimate is the one it holds
    return MergedTree(tokens, parents, cap_siblings(parents, probs), owner, shared, sources, learnt, held, held_learnt)


def cap_siblings(parents: npt.NDArray[np.int32], probs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """`probs` with every node's children summing to at most the node's probability (the
    root's: 1). Where they sum to more, the likeliest child keeps its estimate and each next
    one (by estimate; ties in node order, the likelier candidate's first) gets at most what
    its elder siblings left; a child cut from p to p' scales its subtree by p' / p. Parents
    come before their children (`_core.tree_cap_siblings`; an empty tree gives an empty array)."""
    return _core.tree_cap_siblings(parents, probs)
