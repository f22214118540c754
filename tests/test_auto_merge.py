"""auto's tree merge in the C++ core (`_core.tree_merge`) against the rule written out in
Python, on random candidate sets with shared prefixes, ties, learnt estimates and path limits."""

from __future__ import annotations

import numpy as np
import pytest

from pyaccel import _core
from pyaccel.methods.auto import Candidate
from pyaccel.methods.auto.merge import merge_trees


def _merged_by_rule(cands: list[Candidate], max_leaves: int) -> dict[str, list]:
    """Candidates placed likeliest first (by expected tokens, ties in the order given), each
    node in its own order; a node is found by its path of tokens from the root. A new node
    that starts one more root-to-leaf path is left out with its subtree once the limit is
    reached. Per node: the largest estimate and the first source to give it; per source its
    largest estimate and whether the first candidate to give that one was learnt."""
    sources = list(dict.fromkeys(c.source for c in cands))
    path_of: dict[tuple[int, ...], int] = {}
    tokens, parents, probs, owner = [], [], [], []
    held: list[dict[int, tuple[float, bool]]] = []
    n_children: list[int] = []
    leaves = 0
    for cand in sorted(cands, key=lambda c: -c.expected_tokens):
        src = sources.index(cand.source)
        paths: list[tuple[int, ...] | None] = []
        for tok, par, p in zip(cand.tokens.tolist(), cand.parents.tolist(), cand.path_probs.tolist()):
            above = () if par < 0 else paths[par]
            if above is None:
                paths.append(None)
                continue
            path = above + (tok,)
            node = path_of.get(path)
            if node is None:
                parent = path_of[above] if above else -1
                new_leaf = parent < 0 or n_children[parent] > 0
                if new_leaf and leaves >= max(0, max_leaves):
                    paths.append(None)
                    continue
                leaves += new_leaf
                if parent >= 0:
                    n_children[parent] += 1
                node = path_of[path] = len(tokens)
                tokens.append(tok), parents.append(parent), probs.append(p), owner.append(src)
                held.append({src: (p, cand.learnt)}), n_children.append(0)
            else:
                if p > held[node].get(src, (-1.0, False))[0]:
                    held[node][src] = (p, cand.learnt)
                if p > probs[node]:
                    probs[node], owner[node] = p, src
            paths.append(path)
    grid = [[held[i].get(s, (-1.0, False))[0] for s in range(len(sources))] for i in range(len(tokens))]
    learnt = [[held[i].get(s, (-1.0, False))[1] for s in range(len(sources))] for i in range(len(tokens))]
    return {"tokens": tokens, "parents": parents, "probs": probs, "owner": owner, "held": grid,
            "held_learnt": learnt, "sources": sources}


def _random_candidates(rng: np.random.Generator) -> list[Candidate]:
    vocab = int(rng.integers(2, 6))  # a small vocabulary: candidates share prefixes often
    out = []
    for _ in range(int(rng.integers(1, 6))):
        n = int(rng.integers(0, 12))
        parents = np.array([-1] + [int(rng.integers(-1, i)) for i in range(1, n)], np.int32)[:n]
        probs = rng.uniform(0.0, 1.0, n)
        if rng.random() < 0.5:
            probs = np.round(probs, 1)  # ties between candidates' estimates
        out.append(Candidate(rng.integers(0, vocab, n).astype(np.int32), parents, probs,
                             f"s{int(rng.integers(0, 3))}", learnt=bool(rng.random() < 0.3)))
    return out


def test_the_merge_matches_the_rule_exactly() -> None:
    rng = np.random.default_rng(11)
    for _ in range(600):
        cands = _random_candidates(rng)
        max_leaves = int(rng.integers(0, 10))
        want = _merged_by_rule(cands, max_leaves)
        tree = merge_trees(cands, max_leaves)
        assert list(tree.sources) == want["sources"]
        assert tree.tokens.tolist() == want["tokens"] and tree.parents.tolist() == want["parents"]
        assert tree.owner.tolist() == want["owner"]
        assert tree.held.tolist() == want["held"] and tree.held_learnt.tolist() == want["held_learnt"]
        assert tree.shared.tolist() == [sum(p >= 0 for p in row) > 1 for row in want["held"]]
        assert tree.learnt.tolist() == [row[o] for row, o in zip(want["held_learnt"], want["owner"])]
        raw = np.array(want["probs"], dtype=np.float64)
        assert tree.path_probs.tolist() == (_core.tree_cap_siblings(np.array(want["parents"], np.int32), raw).tolist()
                                            if len(raw) else [])
        leaves = sum(1 for i in range(len(tree)) if i not in set(tree.parents.tolist()))
        assert leaves <= max(0, max_leaves)


def test_an_empty_merge() -> None:
    tree = merge_trees([], max_leaves=4)
    assert len(tree) == 0 and tree.held.shape == (0, 0)
    empty = Candidate(np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0), "x")
    assert len(merge_trees([empty], max_leaves=4)) == 0


def test_the_core_rejects_malformed_candidates() -> None:
    tok, par, probs = np.array([1, 2], np.int32), np.array([-1, 0], np.int32), np.array([0.5, 0.4])
    with pytest.raises(ValueError, match="parents"):
        _core.tree_merge([(tok, np.array([-1, 1], np.int32), probs, 0, False)], 1, 4)
    with pytest.raises(ValueError, match="source 1, outside"):
        _core.tree_merge([(tok, par, probs, 1, False)], 1, 4)
    with pytest.raises(ValueError, match="one length"):
        _core.tree_merge([(tok, par, probs[:1], 0, False)], 1, 4)
    with pytest.raises(ValueError, match="must be"):
        _core.tree_merge([(tok, par, probs)], 1, 4)
    with pytest.raises(ValueError, match="one value per node"):
        _core.tree_cap_siblings(par, probs[:1])
