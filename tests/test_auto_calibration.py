"""auto's calibration of proposer estimates and its plan margin, on scripted trees."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import pyaccel
from pyaccel.methods.auto.calibration import Calibration, CalibrationTuning
from pyaccel.methods.auto import Candidate
from pyaccel.methods.auto.merge import MergedTree, cap_siblings, merge_trees
from pyaccel.methods.auto.policy import (AutoTuning, may_pay, pass_costs, pay_threshold, plan_margin, plan_tree,
                                         rejection_chance)
from pyaccel.methods.lookup.proposer import LookupTuning
from pyaccel.methods.lookup.rewrites import FollowerTuning
from pyaccel.types import SamplingConfig, StepOutcome

from test_auto import CPU, FLAT, LINEAR, Scripted, chain


def two_source_tree() -> MergedTree:
    return merge_trees([chain([10, 11, 12], 0.5, "lookup"), chain([20, 21], 0.45, "pool")], max_leaves=8)


def test_no_evidence_leaves_estimates_alone() -> None:
    tree = two_source_tree()
    assert Calibration().apply(tree).tolist() == pytest.approx(tree.path_probs.tolist())


def test_an_overconfident_proposer_is_distrusted_most_in_its_band() -> None:
    tree = two_source_tree()  # lookup: 0.5, 0.25, 0.125; pool: 0.45, 0.2025
    cal = Calibration(CalibrationTuning(decay=1.0, prior_weight=2.0))
    lookup_nodes = np.flatnonzero(np.asarray([tree.sources[o] for o in tree.owner]) == "lookup")
    first = lookup_nodes[:1]  # the 0.5 node (band 0.4-0.6), verified 20 times, never accepted
    for _ in range(20):
        cal.record(tree, first, np.zeros(0, np.int64))
    probs = cal.apply(tree)
    # accepted 0 of a predicted 20 p: overall R = 2 / (20 p + 2); its band (0 + 2 R) / (20 p + 2)
    p = tree.path_probs[first[0]]
    overall = 2.0 / (20 * p + 2.0)
    assert probs[first[0]] == pytest.approx(p * 2.0 * overall / (20 * p + 2.0))
    pool = [i for i in range(len(tree)) if tree.sources[tree.owner[i]] == "pool"]
    assert probs[pool].tolist() == pytest.approx(tree.path_probs[pool].tolist())  # another proposer
    # Deeper lookup nodes sit in bands without evidence: scaled by the proposer's overall
    # ratio (and never above their parent).
    for i in lookup_nodes[1:]:
        assert probs[i] == pytest.approx(min(tree.path_probs[i] * overall, probs[tree.parents[i]]))
    for i, par in enumerate(tree.parents.tolist()):
        if par >= 0:
            assert probs[i] <= probs[par] + 1e-12


def test_a_shared_node_is_evidence_about_every_proposer_that_offered_it() -> None:
    """A node two proposers put at one place is verified once; its outcome counts for both,
    each at its own estimate, so a proposer whose right guesses are mostly shared (and so
    owned by the other) is not judged by its unshared guesses alone. A learnt estimate is
    not recorded, whoever holds the node."""
    lookup, pool = chain([5, 6], 0.9, "lookup"), chain([5, 7], 0.4, "pool")
    tree = merge_trees([lookup, pool], max_leaves=8)
    cal = Calibration(CalibrationTuning(decay=1.0))
    root, six = tree.tokens.tolist().index(5), tree.tokens.tolist().index(6)
    cal.record(tree, np.array([root, six]), np.array([root]))
    for source, predicted, accepted in (("lookup", 0.9 + 0.81, 1.0), ("pool", 0.4, 1.0)):
        assert cal.evidence(source) == pytest.approx((predicted, accepted))
    learnt = merge_trees([replace(Candidate.chain([5], np.array([0.95]), "lookup"), learnt=True), pool], max_leaves=8)
    cal = Calibration(CalibrationTuning(decay=1.0))
    cal.record(learnt, np.array([0]), np.array([0]))
    assert cal.summary() == {"calibration_pool": pytest.approx(1.0 / 0.4)}


def test_a_well_calibrated_proposer_keeps_its_estimates() -> None:
    tree = merge_trees([chain([10], 0.5, "lookup")], max_leaves=8)
    cal = Calibration(CalibrationTuning(decay=1.0))
    for i in range(200):  # accepted every other time: as predicted
        cal.record(tree, np.array([0]), np.array([0]) if i % 2 else np.zeros(0, np.int64))
    assert cal.apply(tree)[0] == pytest.approx(0.5, abs=0.01)
    assert cal.summary()["calibration_lookup"] == pytest.approx(1.0, abs=0.02)


def test_an_underconfident_proposer_is_not_trusted_beyond_its_estimates() -> None:
    """Verification accepting far more than predicted leaves the estimates as they are
    (max_ratio 1): evidence from where a proposer drafted would raise its estimates
    everywhere else too. A larger max_ratio lets the record raise them."""
    tree = two_source_tree()
    lookup_nodes = np.flatnonzero(np.asarray([tree.sources[o] for o in tree.owner]) == "lookup")
    for max_ratio, boosted in ((1.0, False), (3.0, True)):
        cal = Calibration(CalibrationTuning(decay=1.0, max_ratio=max_ratio))
        for _ in range(50):  # every verified lookup node kept: 1.0, 1.0, 1.0 against 0.5, 0.25, 0.125
            cal.record(tree, lookup_nodes, lookup_nodes)
        assert np.all(cal.ratio("lookup") > 1.5)  # the record itself says "too low"
        probs = cal.apply(tree)
        if boosted:
            assert np.all(probs[lookup_nodes] > tree.path_probs[lookup_nodes] * 1.5)
            assert np.all(probs <= 1.0)
        else:
            assert probs.tolist() == pytest.approx(tree.path_probs.tolist())
    with pytest.raises(ValueError, match="max_ratio"):
        CalibrationTuning(max_ratio=0.0).validate()


def test_old_evidence_fades() -> None:
    tree = merge_trees([chain([10], 0.5, "lookup")], max_leaves=8)
    cal = Calibration(CalibrationTuning(decay=0.9))
    for _ in range(20):
        cal.record(tree, np.array([0]), np.zeros(0, np.int64))
    low = cal.apply(tree)[0]
    for _ in range(200):  # steps without this proposer's nodes
        cal.record(tree, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert low < 0.2 and cal.apply(tree)[0] == pytest.approx(0.5, abs=0.01)


def test_the_fade_matches_fading_every_count_each_step() -> None:
    """The record fades by one shared scale; its ratios equal those of counts multiplied by
    the decay at every step, also past the point where that scale is folded into them."""
    tree = two_source_tree()
    decay = 0.5  # folds after ~330 steps
    cal = Calibration(CalibrationTuning(decay=decay))
    bands = len(CalibrationTuning().edges) + 1
    pred = {s: np.zeros(bands) for s in tree.sources}
    acc = {s: np.zeros(bands) for s in tree.sources}
    rng = np.random.default_rng(3)
    for step in range(800):
        verified = np.flatnonzero(rng.random(len(tree)) < 0.4)
        kept = verified[rng.random(len(verified)) < 0.5]
        cal.record(tree, verified, kept)
        for s in tree.sources:
            pred[s] *= decay
            acc[s] *= decay
        for i in verified:
            src = tree.sources[tree.owner[i]]
            band = int(np.searchsorted(CalibrationTuning().edges, tree.path_probs[i], side="right"))
            pred[src][band] += tree.path_probs[i]
            acc[src][band] += float(i in kept)
        if step % 97 == 0 or step > 795:
            for s in tree.sources:
                overall = (acc[s].sum() + 2.0) / (pred[s].sum() + 2.0)
                np.testing.assert_allclose(cal.ratio(s), (acc[s] + 2.0 * overall) / (pred[s] + 2.0), rtol=1e-9)


def test_auto_stops_drafting_a_proposer_that_is_never_right() -> None:
    # On a curve where every extra token costs 0.1, a chain at 0.6 per token clearly pays;
    # verification then never accepts it.
    wrong = Scripted("wrong", [chain([10, 11, 12], 0.6, "wrong")])
    auto = pyaccel.Auto(lookup=False, lookahead=False, use_draft=False, extra=[wrong],
                        costs=pyaccel.CostModel.fixed(CPU[:1] + [1.1] * 31))
    auto.begin([1, 2, 3], SamplingConfig())
    sizes = []
    for step in range(30):
        draft = auto.propose([1, 2, 3], budget=32)
        sizes.append(len(draft))
        auto.observe(StepOutcome(draft, [], 99, 3, np.zeros((1 + len(draft), 4), np.float32)))
    assert sizes[0] == 3 and sizes[-1] == 0
    assert auto.counters["calibration_wrong"] == 0.0


def test_a_plan_that_barely_pays_is_not_drafted() -> None:
    # One node at 0.6 on a curve where two tokens cost 1.55: expected 1.6 / 1.55 = 1.03.
    offered = [chain([10], 0.6, "x")]
    curve = [1.0, 1.55] + [3.0] * 30
    for margin, drafts in ((0.0, 1), (0.05, 0)):
        auto = pyaccel.Auto(lookup=False, lookahead=False, use_draft=False, extra=[Scripted("x", offered)],
                            tuning=AutoTuning(plan_margin=margin, risk_margin=0.0),
                            costs=pyaccel.CostModel.fixed(curve))
        auto.begin([1, 2, 3], SamplingConfig())
        assert len(auto.propose([1, 2, 3], budget=32)) == drafts
    with pytest.raises(ValueError, match="plan_margin"):
        pyaccel.Auto(tuning=AutoTuning(plan_margin=1.5))
    with pytest.raises(ValueError, match="edges"):
        Calibration(CalibrationTuning(edges=(0.5, 0.2)))
    with pytest.raises(ValueError, match="learnt_plan_margin"):
        AutoTuning(learnt_plan_margin=-0.1).validate()
    with pytest.raises(ValueError, match="strong_run"):
        pyaccel.Auto(lookup=False, tuning=AutoTuning(prompt_lookup=LookupTuning(follower=FollowerTuning(strong_run=0))))


def test_the_margin_is_weighed_by_each_kind_of_nodes_expected_tokens() -> None:
    probs = np.array([0.6, 0.3, 0.1])
    assert plan_margin(probs, np.array([True, True, True]), 0.1, 0.0) == pytest.approx(0.0)
    assert plan_margin(probs, np.array([False, False, False]), 0.1, 0.0) == pytest.approx(0.1)
    # 0.9 of the 1.0 expected tokens are learnt: 0.9 * 0.02 + 0.1 * 0.1.
    assert plan_margin(probs, np.array([True, True, False]), 0.1, 0.02) == pytest.approx(0.028)
    assert plan_margin(np.zeros(2), np.array([True, False]), 0.1, 0.0) == pytest.approx(0.1)


@pytest.mark.parametrize("learnt, drafts", [(True, 1), (False, 0)])
def test_a_learnt_copy_drafts_on_a_plan_that_barely_pays(learnt: bool, drafts: int) -> None:
    # One node at 0.6 on a curve where two tokens cost 1.55: x1.03, under the 10% margin of
    # unlearnt estimates, above a learnt margin of 0.
    node = replace(chain([10], 0.6, "x"), learnt=learnt)
    curve = [1.0, 1.55] + [3.0] * 30
    tree = merge_trees([node], max_leaves=8)
    plan = plan_tree(pyaccel.CostModel.fixed(curve), tree, tree.path_probs, 3, 32, 0.1, 0.0)
    assert (0 if plan is None else len(plan.nodes)) == drafts
    auto = pyaccel.Auto(lookup=False, lookahead=False, use_draft=False, extra=[Scripted("x", [node])],
                        tuning=AutoTuning(plan_margin=0.1, learnt_plan_margin=0.0, risk_margin=0.0),
                        costs=pyaccel.CostModel.fixed(curve))
    auto.begin([1, 2, 3], SamplingConfig())
    assert len(auto.propose([1, 2, 3], budget=32)) == drafts


def test_stats_say_which_proposer_each_accepted_token_came_from() -> None:
    from pyaccel.generator import accepted_by

    class Counting(pyaccel.Proposer):
        name = "mix"

        def __init__(self, counts: dict[str, float]) -> None:
            self.counts = counts

        def propose(self, tokens: list[int], budget: int) -> "pyaccel.types.Draft":
            raise AssertionError("not called")

        def _counters(self) -> dict[str, float]:
            return dict(self.counts)

    before = {"accepted_lookup": 5.0, "accepted_shared": 2.0}
    method = Counting({"accepted_lookup": 12.0, "accepted_lookahead": 3.0, "accepted_shared": 9.0})
    assert accepted_by(method, before, 10) == {"lookup": 7, "lookahead": 3}
    plain_counts = Counting({"drafted": 4.0, "accepted": 4.0})
    assert accepted_by(plain_counts, {}, 4) == {"mix": 4}  # a single method: all its own
    assert accepted_by(plain_counts, {}, 0) == {}


# ---- the bound that skips building the tree -------------------------------------------------


def _random_candidates(rng: np.random.Generator) -> list[Candidate]:
    out = []
    for c in range(int(rng.integers(1, 4))):
        n = int(rng.integers(1, 6))
        parents = np.array([-1] + [int(rng.integers(-1, i)) for i in range(1, n)], np.int32)
        probs = np.empty(n)
        for i, par in enumerate(parents.tolist()):
            probs[i] = (1.0 if par < 0 else probs[par]) * float(rng.uniform(0.05, 1.0))
        tokens = rng.integers(0, 4, size=n).astype(np.int32)  # few tokens: candidates overlap
        out.append(Candidate(tokens, parents, cap_siblings(parents, probs), f"s{c}"))
    return out


@pytest.mark.parametrize("curve", [CPU, FLAT, [1.0, 1.55, 1.9, 1.7] + [3.0] * 28], ids=["cpu", "flat", "bumpy"])
def test_the_bound_never_skips_a_tree_that_pays(curve: list[float]) -> None:
    costs = pyaccel.CostModel.fixed(curve)
    rng = np.random.default_rng(7)
    skipped = 0
    for _ in range(300):
        cands = _random_candidates(rng)
        tree = merge_trees(cands, max_leaves=8)
        budget = int(rng.integers(1, 12))
        margin = float(rng.choice([0.0, 0.03, 0.2]))
        bound = may_pay(pass_costs(costs.curve(0)), np.concatenate([c.path_probs for c in cands]), budget, margin)
        plan = plan_tree(costs, tree, tree.path_probs, 0, budget, margin)
        assert bound or plan is None  # a plan that pays is never skipped
        skipped += int(not bound)
    assert skipped > 0  # and on this mix some steps are skipped without a tree


@pytest.mark.parametrize("curve", [CPU, FLAT, [1.0, 1.55, 1.9, 1.7] + [3.0] * 28], ids=["cpu", "flat", "bumpy"])
def test_below_the_pay_threshold_nothing_pays_and_just_above_it_something_does(curve: list[float]) -> None:
    costs = pyaccel.CostModel.fixed(curve)
    rng = np.random.default_rng(11)
    for _ in range(300):
        budget = int(rng.integers(1, 40))
        margin = float(rng.choice([0.0, 0.03, 0.2]))
        theta = pay_threshold(pass_costs(costs.curve(0)), budget, margin)
        probs = rng.uniform(0.0, 1.0, size=int(rng.integers(1, 50)))
        if probs.max() < theta:
            assert not may_pay(pass_costs(costs.curve(0)), probs, budget, margin)
        # The threshold is exact: n nodes just above it pay for the n that sets it.
        n = min(budget, len(curve) - 1)
        need = [((1.0 + margin) * curve[k] / curve[0] - 1.0) / k for k in range(1, n + 1)]
        best = int(np.argmin(need)) + 1
        assert theta == pytest.approx(min(need))
        if theta < 1.0:
            assert may_pay(pass_costs(costs.curve(0)), np.full(best, theta + 1e-9), budget, margin)
            assert not may_pay(pass_costs(costs.curve(0)), np.full(budget, theta - 1e-9), budget, margin)
        # Fewer nodes allowed never lowers it (so the full curve's holds for every budget).
        assert pay_threshold(pass_costs(costs.curve(0)), len(curve) - 1, margin) <= theta + 1e-12


def test_calibration_bound_is_at_least_every_rescaled_estimate() -> None:
    rng = np.random.default_rng(5)
    for max_ratio in (0.5, 1.0, 2.5):
        cal = Calibration(CalibrationTuning(max_ratio=max_ratio))
        cal.add("s", rng.uniform(0, 1, 40), (rng.uniform(0, 1, 40) < 0.8).astype(float))
        for cand in _random_candidates(rng):
            cand = Candidate(cand.tokens, cand.parents, cand.path_probs, "s", learnt=bool(rng.integers(2)))
            assert cal.candidate(cand).max() <= cal.bound(cand) + 1e-12
    assert Calibration().bound(Candidate.chain([], [], "s")) == 0.0


def test_auto_builds_no_tree_where_nothing_could_pay() -> None:
    weak = Scripted("weak", [chain([10, 11, 12], 0.3, "weak")])
    auto = pyaccel.Auto(lookup=False, lookahead=False, use_draft=False, extra=[weak],
                        costs=pyaccel.CostModel.fixed(CPU))
    auto.begin([1, 2, 3], SamplingConfig())
    draft = auto.propose([1, 2, 3], budget=32)
    assert len(draft) == 0 and auto._step is not None and auto._step.tree is None
    auto.observe(StepOutcome(draft, [], 99, 3, np.zeros((1, 4), np.float32)))
    assert auto.counters["steps"] == 1 and "drafting_steps" not in auto.counters


# ---- estimates a proposer learnt itself ------------------------------------------------------


def test_learnt_estimates_are_neither_rescaled_nor_recorded() -> None:
    copy = replace(chain([10, 11], 0.5, "lookup"), learnt=True)  # lookup's copy statistics
    fresh = chain([20], 0.3, "lookup")  # a fresh match: its prior restarts every prompt
    tree = merge_trees([copy, fresh], max_leaves=8)
    assert tree.learnt.tolist() == [True, True, False]
    cal = Calibration(CalibrationTuning(decay=1.0))
    for _ in range(20):  # every node verified, none accepted
        cal.record(tree, np.arange(len(tree)), np.zeros(0, np.int64))
    probs = cal.apply(tree)
    assert probs[:2].tolist() == pytest.approx(tree.path_probs[:2].tolist())
    assert probs[2] < 0.1 * tree.path_probs[2]
    assert cal.candidate(copy).tolist() == copy.path_probs.tolist()
    assert cal.candidate(fresh)[0] == pytest.approx(probs[2])
    assert cal.evidence("lookup") == pytest.approx((20 * 0.3, 0.0))  # the fresh node's evidence only


def test_a_shared_node_takes_the_learnt_flag_of_the_estimate_it_keeps() -> None:
    tree = merge_trees([chain([5, 6], 0.9, "pool"), replace(chain([5], 0.6, "lookup"), learnt=True)], max_leaves=8)
    assert tree.learnt.tolist() == [False, False]  # the pool's 0.9 won node 5
    tree = merge_trees([chain([5, 6], 0.5, "pool"), replace(chain([5], 0.6, "lookup"), learnt=True)], max_leaves=8)
    assert tree.learnt.tolist() == [True, False]


# ---- shadows: evidence from candidates nobody drafted ----------------------------------------


def _reference(probs: list[float], kept: list[float], source: str = "pool") -> Calibration:
    """What verification of the same nodes would have recorded."""
    ref = Calibration(CalibrationTuning(decay=1.0))
    ref.add(source, np.asarray(probs), np.asarray(kept))
    return ref


def test_a_shadow_counts_as_verification_would_have() -> None:
    """A watched chain is scored position by position as the real tokens arrive: right
    positions are accepted, the first wrong one and every node after it are not."""
    cal = Calibration(CalibrationTuning(decay=1.0, shadow_depth=4))
    probs = [0.9, 0.7, 0.5, 0.3, 0.1]
    cal.watch(3, [Candidate.chain([10, 11, 12, 13, 14], probs, "pool")])
    cal.settle([1, 2, 3, 10])  # one position known: right
    np.testing.assert_allclose(cal.ratio("pool"), _reference(probs[:1], [1.0]).ratio("pool"))
    cal.settle([1, 2, 3, 10, 11, 99, 5, 6, 7])  # the next right, then a miss
    np.testing.assert_allclose(cal.ratio("pool"), _reference(probs[:4], [1.0, 1.0, 0.0, 0.0]).ratio("pool"))
    cal.settle([1, 2, 3, 10, 11, 99, 5, 6, 7, 8])  # settled chains are not scored again
    np.testing.assert_allclose(cal.ratio("pool"), _reference(probs[:4], [1.0, 1.0, 0.0, 0.0]).ratio("pool"))


def test_a_shadow_follows_only_the_main_chain_of_a_tree() -> None:
    cal = Calibration(CalibrationTuning(decay=1.0, shadow_depth=8))
    tree = Candidate(np.array([10, 11, 20, 12], np.int32), np.array([-1, 0, 0, 1], np.int32),
                     np.array([0.8, 0.5, 0.2, 0.4]), "pool")
    cal.watch(0, [tree])
    cal.settle([10, 11, 12])  # nodes 0 and 1 form the main chain; node 2 is a sibling
    np.testing.assert_allclose(cal.ratio("pool"), _reference([0.8, 0.5], [1.0, 1.0]).ratio("pool"))


def test_no_shadows_when_disabled_learnt_or_ended() -> None:
    offered = Candidate.chain([10, 11], [0.9, 0.8], "pool")
    learnt = Candidate(offered.tokens, offered.parents, offered.path_probs, "lookup", learnt=True)
    off = Calibration(CalibrationTuning(shadow_depth=0))
    off.watch(0, [offered])
    on = Calibration(CalibrationTuning(shadow_depth=4))
    on.watch(0, [learnt])  # lookup learns from every position itself
    ended = Calibration(CalibrationTuning(shadow_depth=4))
    ended.watch(0, [offered])
    ended.end()  # the generation is over: its real tokens never come
    for cal in (off, on, ended):
        cal.settle([10, 11, 12])
        assert cal.summary() == {}
    with pytest.raises(ValueError, match="shadow_depth"):
        CalibrationTuning(shadow_depth=-1).validate()


def _undrafted_steps(auto: pyaccel.Auto, steps: int = 6) -> None:
    """Steps at which `auto` drafts nothing and the real tokens are 10, 11, 12 each time."""
    auto.begin([1, 2, 3], SamplingConfig())
    history = [1, 2, 3]
    for _ in range(steps):
        assert len(auto.propose(history, budget=32)) == 0
        history = history + [10, 11, 12]  # the guess came true (three plain steps)


def test_auto_learns_from_a_proposer_it_does_not_draft() -> None:
    """On a curve where nothing pays, auto drafts nothing, yet with shadows on a proposer
    whose guesses come true is found accepted more often than it estimated."""
    right = Scripted("right", [chain([10, 11, 12], 0.5, "right")])
    auto = pyaccel.Auto(lookup=False, lookahead=False, use_draft=False, extra=[right],
                        tuning=AutoTuning(calibration=CalibrationTuning(shadow_depth=4)),
                        costs=pyaccel.CostModel.fixed(LINEAR[:32]))
    _undrafted_steps(auto)
    assert auto.counters["calibration_right"] > 1.0
    no_shadow = pyaccel.Auto(lookup=False, lookahead=False, use_draft=False, extra=[right],
                             costs=pyaccel.CostModel.fixed(LINEAR[:32]))  # the default: off
    _undrafted_steps(no_shadow)
    assert "calibration_right" not in no_shadow.counters


def test_the_chance_of_a_whole_rejection_is_one_minus_the_first_nodes_estimates() -> None:
    # Root children 0 (0.5) and 3 (0.2); node 1 and 2 under 0, node 4 under 3.
    parents = np.array([-1, 0, 1, -1, 3], np.int32)
    probs = np.array([0.5, 0.4, 0.3, 0.2, 0.1])
    assert rejection_chance(np.arange(5), parents, probs) == pytest.approx(0.3)
    assert rejection_chance(np.array([0, 1]), parents, probs) == pytest.approx(0.5)
    assert rejection_chance(np.array([3, 4]), parents, probs) == pytest.approx(0.8)
    assert rejection_chance(np.array([0, 3]), parents, np.array([0.7, 0, 0, 0.6, 0])) == 0.0  # never negative


@pytest.mark.parametrize("first, drafts", [(0.95, 3), (0.55, 0)])
def test_a_plan_likely_rejected_whole_needs_the_risk_margin_more(first: float, drafts: int) -> None:
    # A 3-node chain on a curve where 4 tokens cost 1.8: its expected speedup clears the
    # 10% margin either way (first node at 0.55: 2.485 / 1.8 = 1.38x; at 0.95: 1.98x), but
    # at 0.55 its chance of a whole rejection (0.45) times a risk margin of 1.0 lifts the
    # bar to 1.55x (at 0.95 to 1.15x).
    node = chain([10, 11, 12], first, "x")
    node = replace(node, path_probs=first * np.array([1.0, 0.9, 0.8]))
    curve = [1.0, 1.5, 1.55, 1.8] + [3.0] * 28
    tree = merge_trees([node], max_leaves=8)
    costs = pyaccel.CostModel.fixed(curve)
    assert plan_tree(costs, tree, tree.path_probs, 3, 32, 0.1, 0.1, 0.0) is not None
    plan = plan_tree(costs, tree, tree.path_probs, 3, 32, 0.1, 0.1, 1.0)
    assert (0 if plan is None else len(plan.nodes)) == drafts
    auto = pyaccel.Auto(lookup=False, lookahead=False, use_draft=False, extra=[Scripted("x", [node])],
                        tuning=AutoTuning(risk_margin=1.0 - 1e-9), costs=costs)
    auto.begin([1, 2, 3], SamplingConfig())
    assert len(auto.propose([1, 2, 3], budget=32)) == drafts
