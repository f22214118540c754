"""pyaccel._core cost model (CostCurve, chain_plan, tree_plan, AcceptanceStats) against
brute-force Python references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyaccel import _core

SETTINGS = settings(max_examples=150, deadline=None)
TIE = 1e-9

# docs/design.md, "The reference curve": 2 AVX2 cores, Qwen2.5-Coder-1.5B Q4_K_M. 12 and 16
# tokens cost the same.
CPU_SIZES = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64]
CPU_TIMES = [1.00, 1.73, 2.34, 2.90, 3.38, 4.01, 6.95, 7.96, 8.29, 8.31, 10.9, 12.9, 15.4, 22.6, 28.1]


def cpu_curve() -> _core.CostCurve:
    return _core.CostCurve.from_points(CPU_SIZES, CPU_TIMES)


def flat_times(n: int = 64) -> list[float]:
    """GPU-like: verifying b tokens costs barely more than one."""
    return [1.0 + 0.01 * b for b in range(1, n + 1)]


# ---- references --------------------------------------------------------------------------


def ref_cost(times: list[float], b: int) -> float:
    if b <= len(times):
        return times[b - 1]
    if len(times) == 1:
        return times[0] * b
    return times[-1] + max(0.0, times[-1] - times[-2]) * (b - len(times))


def ref_expected_tokens(alpha: list[float], k: int) -> float:
    """By enumerating outcomes: exactly j of k draft tokens accepted commits j + 1."""
    total, p_prefix = 0.0, 1.0
    for j in range(k + 1):
        p_stop = 1.0 - alpha[j] if j < k else 1.0
        total += p_prefix * p_stop * (j + 1)
        if j < k:
            p_prefix *= alpha[j]
    return total


def ref_pick(speedups: list[float]) -> int:
    """argmax, ties (within TIE) to the smallest."""
    best = max(speedups)
    return next(i for i, s in enumerate(speedups) if s >= best * (1 - TIE))


def ref_chain(times, alpha, draft_cost, max_len):
    t1 = times[0]
    speedups = [
        ref_expected_tokens(alpha, k) / (ref_cost(times, k + 1) + k * draft_cost * t1) * t1
        for k in range(max_len + 1)
    ]
    return ref_pick(speedups), speedups


def ref_best_subsets(parents: list[int], prob: list[float]) -> list[float]:
    """best[m] = largest sum of path probabilities over prefix-closed subsets of size m."""
    n = len(parents)
    best = [-1.0] * (n + 1)
    for mask in range(1 << n):
        chosen = [i for i in range(n) if mask >> i & 1]
        if all(parents[i] < 0 or mask >> parents[i] & 1 for i in chosen):
            best[len(chosen)] = max(best[len(chosen)], sum(prob[i] for i in chosen))
    return best


# ---- CostCurve ---------------------------------------------------------------------------


def test_cpu_curve_interpolates_and_extrapolates():
    curve = cpu_curve()
    assert curve.measured == 64
    assert curve.cost_at(7) == pytest.approx((4.01 + 6.95) / 2)
    assert curve.cost_at(14) == pytest.approx(8.30)
    t63 = curve.cost_at(63)
    assert curve.cost_at(66) == pytest.approx(28.1 + 2 * (28.1 - t63))
    assert _core.CostCurve([2.0]).cost_at(5) == pytest.approx(10.0)  # one point: compute-bound
    assert _core.CostCurve([1.0, 3.0, 2.0]).cost_at(5) == pytest.approx(2.0)  # slope clamped at 0


curve_strategy = st.lists(st.integers(1, 40).map(lambda x: x / 4), min_size=1, max_size=24)


@SETTINGS
@given(times=curve_strategy, max_b=st.integers(1, 30))
def test_efficient_sizes_are_the_undominated_sizes(times, max_b):
    curve = _core.CostCurve(times)
    want = [b for b in range(1, max_b + 1)
            if all(ref_cost(times, b) < ref_cost(times, c) for c in range(b + 1, max_b + 1))]
    assert list(curve.efficient_sizes(max_b)) == want


def test_cost_curve_rejects_bad_measurements():
    for bad in ([], [1.0, 0.0], [1.0, math.nan], [1.0, math.inf]):
        with pytest.raises(ValueError, match="times"):
            _core.CostCurve(bad)
    with pytest.raises(ValueError, match="b = 1"):
        _core.CostCurve.from_points([2, 4], [1.0, 2.0])
    with pytest.raises(ValueError, match="increasing"):
        _core.CostCurve.from_points([1, 4, 3], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="one time per size"):
        _core.CostCurve.from_points([1, 2], [1.0])
    with pytest.raises(ValueError, match=">= 1"):
        cpu_curve().cost_at(0)


# ---- chain_plan --------------------------------------------------------------------------


def check_against_reference(times, alpha, draft_cost, max_len):
    plan = _core.chain_plan(_core.CostCurve(times), alpha, draft_cost, max_len)
    best, speedups = ref_chain(times, alpha, draft_cost, max_len)
    assert plan.best_len == best
    assert plan.expected_speedup == pytest.approx(speedups[best], rel=1e-9)
    assert plan.expected_tokens == pytest.approx(ref_expected_tokens(alpha, best), rel=1e-9)
    assert plan.expected_cost == pytest.approx(
        ref_cost(times, best + 1) + best * draft_cost * times[0], rel=1e-9)
    return plan


def test_cpu_curve_drafts_only_with_high_acceptance():
    times = list(cpu_curve().times)
    high = check_against_reference(times, [0.9] * 16, 0.0, 16)
    assert high.best_len == 4 and high.expected_speedup > 1.2
    low = check_against_reference(times, [0.3] * 16, 0.0, 16)
    assert (low.best_len, low.expected_tokens, low.expected_speedup) == (0, 1.0, 1.0)


def test_flat_curve_drafts_long_even_with_modest_acceptance():
    modest = check_against_reference(flat_times(), [0.6] * 32, 0.0, 32)
    assert modest.best_len >= 5 and modest.expected_speedup > 2.0
    assert check_against_reference(flat_times(), [0.8] * 32, 0.0, 32).best_len >= 10


def test_slow_draft_model_drafts_nothing_on_the_cpu():
    assert check_against_reference(list(cpu_curve().times), [0.9] * 16, 0.6, 16).best_len == 0
    assert check_against_reference(list(cpu_curve().times), [0.99] * 16, 0.6, 16).best_len == 0


def test_plateau_never_verifies_12_when_16_costs_the_same():
    # Cheap up to 11 tokens, a step to a plateau 12..16, then expensive.
    times = [1.0 + 0.01 * b if b <= 11 else 1.12 if b <= 16 else 1.12 + 0.5 * (b - 16)
             for b in range(1, 25)]
    plan = check_against_reference(times, [0.9] * 20, 0.0, 20)
    assert plan.best_len == 15  # verifies 16; 11..14 cost the same and commit less
    # Nothing past draft position 11 is ever accepted: verifying 12..16 ties, the shortest wins.
    assert check_against_reference(times, [0.9] * 11 + [0.0] * 9, 0.0, 20).best_len == 11


@SETTINGS
@given(times=curve_strategy, alpha=st.lists(st.integers(0, 20).map(lambda x: x / 20), max_size=24),
       draft_cost=st.sampled_from([0.0, 0.05, 0.2, 0.6]), data=st.data())
def test_chain_plan_matches_brute_force(times, alpha, draft_cost, data):
    max_len = data.draw(st.integers(0, len(alpha)))
    plan = check_against_reference(times, alpha, draft_cost, max_len)
    if draft_cost == 0.0 and all(a > 0 for a in alpha[:max_len]) and plan.best_len > 0:
        # A free draft with acceptance > 0 never stops on a dominated size.
        assert plan.best_len + 1 in _core.CostCurve(times).efficient_sizes(max_len + 1)


def test_chain_plan_defaults_and_mistakes():
    curve = cpu_curve()
    assert _core.chain_plan(curve, np.full(16, 0.9)).best_len == 4  # max_len = len(alpha)
    with pytest.raises(ValueError, match="max_len"):
        _core.chain_plan(curve, [0.9] * 3, 0.0, 4)
    with pytest.raises(ValueError, match="alpha"):
        _core.chain_plan(curve, [0.9, 1.5], 0.0, 2)
    with pytest.raises(ValueError, match="draft_cost_per_token"):
        _core.chain_plan(curve, [0.9], -0.1, 1)


# ---- tree_plan ---------------------------------------------------------------------------


@st.composite
def trees(draw):
    n = draw(st.integers(0, 8))
    parents = [draw(st.integers(-1, i - 1)) for i in range(n)]
    prob: list[float] = []
    for i in range(n):  # path probability = product of conditional acceptances
        cond = draw(st.integers(0, 10)) / 10
        prob.append(cond * (prob[parents[i]] if parents[i] >= 0 else 1.0))
    return parents, prob


@SETTINGS
@given(tree=trees(), times=st.sampled_from([CPU_TIMES[:6], flat_times(12), [1.0, 1.1, 1.15, 1.6]]),
       data=st.data())
def test_tree_plan_matches_brute_force(tree, times, data):
    parents, prob = tree
    max_nodes = data.draw(st.integers(0, len(parents)))
    plan = _core.tree_plan(_core.CostCurve(times), prob, parents, max_nodes)
    best = ref_best_subsets(parents, prob)
    speedups = [(1 + best[m]) / ref_cost(times, m + 1) * times[0] for m in range(max_nodes + 1)]
    m = ref_pick(speedups)
    nodes = plan.nodes.tolist()
    assert len(nodes) == m and nodes == sorted(nodes)
    assert plan.expected_speedup == pytest.approx(speedups[m], rel=1e-9)
    assert sum(prob[i] for i in nodes) == pytest.approx(best[m], abs=1e-12)
    assert plan.expected_tokens == pytest.approx(1 + best[m], rel=1e-9)
    assert plan.parents.tolist() == [nodes.index(parents[i]) if parents[i] >= 0 else -1 for i in nodes]


def test_tree_plan_handmade():
    #   root ─┬─ 0 (0.8) ─┬─ 2 (0.6) ── 4 (0.5)
    #         │           └─ 3 (0.1)
    #         └─ 1 (0.15)
    parents, prob = [-1, -1, 0, 0, 2], [0.8, 0.15, 0.6, 0.1, 0.5]
    flat = _core.CostCurve(flat_times(16))
    three = _core.tree_plan(flat, prob, parents, 3)
    assert three.nodes.tolist() == [0, 2, 4] and three.parents.tolist() == [-1, 0, 1]
    assert three.expected_tokens == pytest.approx(2.9)
    assert _core.tree_plan(flat, prob, parents).nodes.tolist() == [0, 1, 2, 3, 4]
    assert _core.tree_plan(cpu_curve(), prob, parents).nodes.tolist() == [0]
    assert len(_core.tree_plan(cpu_curve(), [0.2], [-1]).nodes) == 0
    with pytest.raises(ValueError, match="parents"):
        _core.tree_plan(flat, [0.5, 0.5], [-1, 1])
    with pytest.raises(ValueError, match="one entry per node"):
        _core.tree_plan(flat, [0.5], [-1, 0])


# ---- AcceptanceStats ---------------------------------------------------------------------


class RefStats:
    def __init__(self, n, decay, prior_alpha, prior_weight):
        self.n, self.decay, self.pa, self.pw = n, decay, prior_alpha, prior_weight
        self.tried, self.acc = [0.0] * n, [0.0] * n

    def observe(self, drafted, accepted):
        for i in range(min(self.n, drafted, accepted + 1)):
            self.tried[i] = self.tried[i] * self.decay + 1
            self.acc[i] = self.acc[i] * self.decay + (i < accepted)

    def alpha(self):
        return [(a + self.pa * self.pw) / (t + self.pw) if t + self.pw > 0 else self.pa
                for a, t in zip(self.acc, self.tried)]


steps_strategy = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)).map(
    lambda da: (da[0], min(da))), max_size=30)


@SETTINGS
@given(steps=steps_strategy, n=st.integers(1, 6), decay=st.sampled_from([1.0, 0.95, 0.5]),
       prior_alpha=st.sampled_from([0.0, 0.5, 1.0]), prior_weight=st.sampled_from([0.0, 2.0, 5.0]))
def test_acceptance_stats_match_reference(steps, n, decay, prior_alpha, prior_weight):
    stats = _core.AcceptanceStats(n, decay, prior_alpha, prior_weight)
    ref = RefStats(n, decay, prior_alpha, prior_weight)
    for drafted, accepted in steps:
        stats.observe(drafted, accepted)
        ref.observe(drafted, accepted)
        assert stats.alpha() == pytest.approx(ref.alpha(), rel=1e-12)
        assert [stats.alpha_at(i) for i in range(n)] == stats.alpha().tolist()
    with pytest.raises(ValueError, match="alpha_at"):
        stats.alpha_at(n)


@SETTINGS
@given(steps=steps_strategy)
def test_undecayed_alpha_is_the_empirical_conditional_rate(steps):
    stats = _core.AcceptanceStats(8, 1.0, 0.5, 0.0)
    for drafted, accepted in steps:
        stats.observe(drafted, accepted)
    for i, alpha in enumerate(stats.alpha()):
        tried = sum(1 for d, a in steps if d > i and a >= i)
        kept = sum(1 for d, a in steps if a > i)
        assert alpha == pytest.approx(kept / tried if tried else 0.5)


def test_acceptance_stats_prior_and_mistakes():
    stats = _core.AcceptanceStats(4)
    assert stats.alpha().tolist() == [0.5] * 4 and stats.n_positions == 4
    stats.observe(0, 0)  # nothing drafted: nothing learned
    assert stats.alpha().tolist() == [0.5] * 4
    with pytest.raises(ValueError, match="n_accepted"):
        stats.observe(2, 3)
    for kwargs in ({"decay": 0.0}, {"decay": 1.5}, {"prior_alpha": -0.1}, {"prior_weight": -1.0}):
        with pytest.raises(ValueError):
            _core.AcceptanceStats(4, **kwargs)
    with pytest.raises(ValueError, match="n_positions"):
        _core.AcceptanceStats(0)


def test_acceptance_stats_prior_per_position():
    stats = _core.AcceptanceStats([0.2, 0.9, 1.0], decay=0.5, prior_weight=2.0)
    assert stats.n_positions == 3 and stats.alpha().tolist() == pytest.approx([0.2, 0.9, 1.0])
    stats.observe_position(1, False)  # (0 + 0.9 * 2) / (1 + 2)
    assert stats.alpha().tolist() == pytest.approx([0.2, 0.6, 1.0])
    for bad in ([], [0.5, 1.5], [-0.1]):
        with pytest.raises(ValueError):
            _core.AcceptanceStats(bad)


@pytest.mark.parametrize("alpha", [0.2, 0.9])
def test_stats_feed_the_planner(alpha):
    """The loop the decoder runs: observe, then plan from the estimates."""
    rng = np.random.default_rng(1)
    stats = _core.AcceptanceStats(16)
    for _ in range(400):
        accepted = 0
        while accepted < 16 and rng.random() < alpha:
            accepted += 1
        stats.observe(16, accepted)
    plan = _core.chain_plan(cpu_curve(), stats.alpha())
    assert (plan.best_len > 0) == (alpha > 0.5)
    assert list(itertools.islice(stats.alpha(), 3)) == pytest.approx([alpha] * 3, abs=0.15)
