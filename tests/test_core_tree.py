"""pyaccel._core.tree_layout against a plain-Python reference."""

from __future__ import annotations

import numpy as np
import pytest

from pyaccel import _core


def ref_layout(parents: list[int]) -> tuple[list[int], list[list[int]], list[list[int]]]:
    n = len(parents)
    depth: list[int] = []
    has_child = [False] * n
    for i, p in enumerate(parents):
        depth.append(1 if p < 0 else depth[p] + 1)
        if p >= 0:
            has_child[p] = True
    paths = []
    for leaf in range(n):
        if has_child[leaf]:
            continue
        path = []
        node = leaf
        while node >= 0:
            path.append(node)
            node = parents[node]
        paths.append(path[::-1])
    if n == 0:
        paths = [[]]
    node_seqs = [[k for k, path in enumerate(paths) if i in path] for i in range(n)]
    return depth, paths, node_seqs


def check_against_reference(parents: list[int]) -> None:
    layout = _core.tree_layout(np.asarray(parents, dtype=np.int32))
    depth, paths, node_seqs = ref_layout(parents)
    assert layout.n_nodes == len(parents)
    assert layout.depth.dtype == np.int32
    assert layout.depth.tolist() == depth
    assert layout.paths == paths
    assert layout.node_seqs == node_seqs
    assert layout.n_paths == len(paths)


@pytest.mark.parametrize("n", [1, 2, 5, 64])
def test_chain(n):
    parents = [-1] + list(range(n - 1))
    check_against_reference(parents)
    layout = _core.tree_layout(parents)
    assert layout.paths == [list(range(n))]
    assert layout.node_seqs == [[0]] * n
    assert layout.depth.tolist() == list(range(1, n + 1))


@pytest.mark.parametrize("n", [1, 3, 64])
def test_star(n):
    parents = [-1] * n
    check_against_reference(parents)
    layout = _core.tree_layout(parents)
    assert layout.paths == [[i] for i in range(n)]
    assert layout.node_seqs == [[i] for i in range(n)]
    assert layout.depth.tolist() == [1] * n


def test_empty_tree_has_one_empty_path():
    layout = _core.tree_layout([])
    assert layout.n_nodes == 0
    assert layout.depth.tolist() == []
    assert layout.paths == [[]]
    assert layout.n_paths == 1
    assert layout.node_seqs == []


def test_documented_example():
    layout = _core.tree_layout([-1, -1, 0, 0, 2])
    assert layout.depth.tolist() == [1, 1, 2, 2, 3]
    assert layout.paths == [[1], [0, 3], [0, 2, 4]]
    assert layout.node_seqs == [[1, 2], [0], [2], [1], [2]]


@pytest.mark.parametrize("seed", range(40))
def test_random_trees(seed):
    gen = np.random.default_rng(seed)
    n = int(gen.integers(1, 80))
    bias = gen.uniform(0.0, 1.0)  # 0: bushy, 1: deep
    parents = []
    for i in range(n):
        if i == 0 or gen.uniform() < 0.1:
            parents.append(-1)
        elif gen.uniform() < bias:
            parents.append(i - 1)
        else:
            parents.append(int(gen.integers(0, i)))
    check_against_reference(parents)


def test_accepts_lists_tuples_and_any_int_dtype():
    for parents in ([-1, 0, 0], (-1, 0, 0), np.array([-1, 0, 0], dtype=np.int64),
                    np.array([-1, 0, 0], dtype=np.int16)):
        assert _core.tree_layout(parents).paths == [[0, 1], [0, 2]]


@pytest.mark.parametrize("parents", [
    [0],            # points at itself
    [-1, 1],        # points at itself
    [-1, 2, -1],    # points forward
    [-2],           # below -1
    [-1, 0, 5],     # beyond n
])
def test_invalid_parents_raise(parents):
    with pytest.raises(ValueError, match="parent index must point to an earlier node"):
        _core.tree_layout(parents)


@pytest.mark.parametrize("parents", [
    np.array([[-1, 0]], dtype=np.int32),
    np.array([-1.0, 0.0]),
    ["a", "b"],
    [-1, 2**40],
])
def test_malformed_parents_raise(parents):
    with pytest.raises(ValueError):
        _core.tree_layout(parents)


def random_parents(seed: int) -> list[int]:
    gen = np.random.default_rng(seed)
    n = int(gen.integers(0, 60))
    return [-1 if i == 0 or gen.uniform() < 0.15 else
            (i - 1 if gen.uniform() < 0.6 else int(gen.integers(0, i))) for i in range(n)]


def ref_path_product(parents: list[int], factor: list[float], i: int) -> float:
    out = 1.0
    path = []
    while i >= 0:
        path.append(i)
        i = parents[i]
    for j in reversed(path):  # from the root down
        out *= factor[j]
    return out


@pytest.mark.parametrize("seed", range(30))
def test_depths_chain_length_and_path_products_match_references(seed):
    parents = random_parents(seed)
    n = len(parents)
    gen = np.random.default_rng(1000 + seed)
    factor = gen.uniform(0.1, 1.0, n)
    depth, _, _ = ref_layout(parents)
    assert _core.tree_depths(np.asarray(parents, np.int32)).tolist() == depth
    chain = 0
    while chain < n and parents[chain] == chain - 1:
        chain += 1
    assert _core.tree_chain_length(parents) == chain
    got = _core.tree_path_products(np.asarray(parents, np.int32), factor)
    assert got.tolist() == [ref_path_product(parents, factor.tolist(), i) for i in range(n)]


@pytest.mark.parametrize("seed", range(30))
def test_flagged_products_match_reference(seed):
    parents = random_parents(seed)
    n = len(parents)
    gen = np.random.default_rng(2000 + seed)
    flags = gen.uniform(size=40) < 0.2
    positions = gen.integers(-3, 50, n)  # some before the stream, some beyond the flags
    probs = gen.uniform(0.0, 1.0, n)
    h, n_chain = 0.4, int(gen.integers(0, n + 2))
    flagged = [bool(0 <= p < len(flags) and flags[p]) for p in positions]
    got = _core.tree_flagged_products(parents, positions, probs, flags, h, n_chain)
    if not any(flagged):
        assert got is None
        return
    factor = [h if f else 1.0 for f in flagged]
    want = [probs[i] * ref_path_product(parents, factor, i) for i in range(n)]
    assert got[0].tolist() == want
    assert got[1] == [i for i in range(min(n, n_chain)) if flagged[i]]


def test_tree_helpers_refuse_bad_input():
    with pytest.raises(ValueError, match="parent index must point to an earlier node"):
        _core.tree_depths([0])
    with pytest.raises(ValueError, match="one value per node"):
        _core.tree_path_products([-1, 0], [1.0])
    with pytest.raises(ValueError, match="one value per node"):
        _core.tree_flagged_products([-1, 0], np.zeros(1, np.int64), np.ones(2), np.zeros(4, bool), 0.5, 2)
    assert _core.tree_chain_length([]) == 0 and _core.tree_path_products([], []).tolist() == []


@pytest.mark.parametrize("parents", [
    [-1, 0, 0],                                   # a list of Python ints
    np.array([-1, 0, 0], dtype=np.int32),         # the per-step fast paths
    np.array([-1, 5, 0, 9, 0], dtype=np.int32)[::2],  # not contiguous: numpy's conversion
    [np.int64(-1), np.int64(0), np.int64(0)],     # numpy scalars in a list
])
def test_int_conversions_agree(parents):
    assert _core.tree_layout(parents).paths == [[0, 1], [0, 2]]
    assert _core.tree_depths(parents).tolist() == [1, 2, 2]


@pytest.mark.parametrize("parents", [[-1, True], [-1, 0.0], [-1, 2**40], [-1, "a"]])
def test_int_conversions_refuse_what_numpy_refuses(parents):
    with pytest.raises((ValueError, TypeError)):
        _core.tree_depths(parents)
