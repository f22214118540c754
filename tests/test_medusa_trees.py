"""Medusa trees, calibration and the heads-cost plan, against brute-force references (no model)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pyaccel import _core
from pyaccel.methods.medusa import Medusa
from pyaccel.methods.medusa.calibration import DepthCalibration, TreeShadows
from pyaccel.methods.medusa.proposer import typical_params, with_step_cost
from pyaccel.methods.medusa.trees import TreeShape, count_leaves, grow_tree, matched_depth, static_scores


def reference_tree(scores: np.ndarray, max_nodes: int, max_leaves: int) -> list[tuple[int, ...]]:
    """Every path (i1, ..., id) scored by the product along it, sorted best first (ties: the
    smaller path), taken in that order when its parent is taken and the paths allow."""
    k_heads, k_ranks = scores.shape
    paths = [p for d in range(1, k_heads + 1) for p in itertools.product(range(k_ranks), repeat=d)]
    score = {p: math.prod(float(scores[j, i]) for j, i in enumerate(p)) for p in paths}
    taken: list[tuple[int, ...]] = []
    for p in sorted(paths, key=lambda p: (-score[p], p)):
        if len(taken) == max_nodes:
            break
        if len(p) > 1 and p[:-1] not in taken:
            continue
        leaves = len([q for q in taken if not any(r[:-1] == q for r in taken)])
        parent_is_leaf = len(p) > 1 and not any(r[:-1] == p[:-1] for r in taken)
        if not parent_is_leaf and leaves + 1 > max_leaves:
            continue
        taken.append(p)
    return taken


def paths_of(shape: TreeShape) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    for i in range(len(shape)):
        par = int(shape.parents[i])
        out.append((out[par] if par >= 0 else ()) + (int(shape.rank[i]),))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_grow_tree_is_the_brute_force_best_first_tree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k_heads, k_ranks = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    if seed % 3 == 0:  # ties everywhere: the order must still be the reference's
        scores = rng.choice([0.25, 0.5, 1.0], size=(k_heads, k_ranks))
    else:
        scores = np.sort(rng.random((k_heads, k_ranks)), axis=1)[:, ::-1]
    for max_nodes in (0, 1, 3, 7, 40):
        for max_leaves in (1, 2, 3, 100):
            shape = grow_tree(scores, max_nodes, max_leaves)
            want = reference_tree(scores, max_nodes, max_leaves)
            assert paths_of(shape) == want
            assert np.all(shape.parents < np.arange(len(shape)))
            assert count_leaves(shape.parents) <= max_leaves
            for i, p in enumerate(want):
                assert shape.head[i] == len(p) - 1
                assert shape.score[i] == pytest.approx(math.prod(scores[j, r] for j, r in enumerate(p)))


def test_unsorted_rank_accuracies_still_give_the_best_nodes() -> None:
    acc = np.array([[0.1, 0.5, 0.05], [0.3, 0.2, 0.4]])  # measured ranks need not be monotone
    shape = grow_tree(acc, 5, 10)
    assert paths_of(shape) == reference_tree(acc, 5, 10)
    assert paths_of(shape)[0] == (1,)


def test_tokens_come_from_each_nodes_head_and_rank() -> None:
    shape = grow_tree(np.array([[0.6, 0.3], [0.5, 0.4]]), 6, 10)
    ids = np.array([[10, 11], [20, 21]], np.int32)
    toks = shape.tokens(ids)
    for i, p in enumerate(paths_of(shape)):
        assert toks[i] == ids[len(p) - 1, p[-1]]
    assert np.array_equal(shape.prefix(3).parents, shape.parents[:3])


def test_bad_scores_and_missing_accuracies_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="probabilities"):
        grow_tree(np.array([[1.5]]), 4, 4)
    with pytest.raises(ValueError, match="heads, ranks"):
        grow_tree(np.zeros(3), 4, 4)
    with pytest.raises(ValueError, match="tree='dynamic'"):
        static_scores((), 10)
    assert static_scores(((0.5, 0.2, 0.1), (0.3, 0.2)), 10).shape == (2, 2)


def test_matched_depth_follows_the_stream() -> None:
    tokens = np.array([5, 6, 7, 8], np.int32)
    parents = np.array([-1, -1, 0, 2], np.int32)  # 5 -> 7 -> 8, and 6
    assert matched_depth(tokens, parents, [5, 7, 8, 1]) == 3
    assert matched_depth(tokens, parents, [6, 7]) == 1
    assert matched_depth(tokens, parents, [9]) == 0
    assert matched_depth(tokens, parents, [5]) == 1


def test_calibration_learns_the_ratio_of_reached_to_expected() -> None:
    cal = DepthCalibration(2, decay=1.0, prior_weight=1.0)
    for i in range(99):  # depth 1: expected 0.5 per tree, reached in one tree of four
        cal.observe(np.array([0.5, 0.1]), 1 if i % 4 == 0 else 0)
    scale = cal.scale()
    assert scale[0] == pytest.approx((25 + 1) / (49.5 + 1))
    assert scale[1] == pytest.approx(1 / (9.9 + 1))  # never reached depth 2
    shape = grow_tree(np.array([[0.8, 0.1], [0.9, 0.05]]), 4, 4)
    p = cal.apply(shape)
    assert np.all(p <= 1.0) and all(p[i] <= p[par] for i, par in enumerate(shape.parents) if par >= 0)


def test_shadows_score_a_tree_once_its_tokens_are_known() -> None:
    cal = DepthCalibration(2, decay=1.0, prior_weight=1.0)
    shadows = TreeShadows(cal)
    shape = grow_tree(np.array([[0.6, 0.3], [0.5, 0.4]]), 6, 10)
    toks = shape.tokens(np.array([[10, 11], [20, 21]], np.int32))
    shadows.add(3, shape, toks)
    shadows.settle([0, 1, 2, 10])  # depth 1 right, depth 2 not known yet
    assert len(shadows) == 1 and cal.expected.sum() == 0
    shadows.settle([0, 1, 2, 10, 21])
    assert len(shadows) == 0
    assert cal.reached.tolist() == [1.0, 1.0]
    shadows.add(3, shape, toks)
    shadows.settle([0, 1, 2, 99])  # left the tree at depth 1: scored at once
    assert len(shadows) == 0 and cal.reached.tolist() == [1.0, 1.0]


def brute_force_pays(times: list[float], probs: np.ndarray, parents: np.ndarray, cost: float) -> bool:
    """Does any prefix-closed subset gain more than `cost` over plain decoding?"""
    n = len(probs)
    for mask in range(1, 1 << n):
        nodes = [i for i in range(n) if mask >> i & 1]
        if all(parents[i] < 0 or mask >> int(parents[i]) & 1 for i in nodes):
            if 1.0 + probs[nodes].sum() - times[len(nodes)] > cost + 1e-12:
                return True
    return False


@pytest.mark.parametrize("seed", range(8))
def test_a_step_cost_makes_the_plan_empty_exactly_when_nothing_pays(seed: int) -> None:
    rng = np.random.default_rng(seed)
    times = [1.0] + list(1.0 + np.cumsum(rng.uniform(0.1, 0.9, size=7)))
    shape = grow_tree(np.sort(rng.random((2, 3)), axis=1)[:, ::-1], 7, 10)
    for cost in (0.0, 0.1, 0.3, 0.6, 1.2):
        plan = _core.tree_plan(with_step_cost(_core.CostCurve(times), cost), shape.score, shape.parents, 7)
        assert (len(plan.nodes) > 0) == brute_force_pays(times, shape.score, shape.parents, cost)


def test_typical_option_and_constructor_checks() -> None:
    assert typical_params(None) is None and typical_params(False) is None
    assert typical_params(True).epsilon == _core.TypicalParams().epsilon
    tp = _core.TypicalParams(epsilon=0.2, delta=0.1)
    assert typical_params(tp) is tp
    with pytest.raises(TypeError, match="TypicalParams"):
        typical_params(0.3)
    with pytest.raises(ValueError, match="static, dynamic"):
        Medusa("x.gguf", tree="sparse")
    with pytest.raises(ValueError, match="max_nodes"):
        Medusa("x.gguf", max_nodes=0)
