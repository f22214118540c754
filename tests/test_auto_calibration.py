"""auto's calibration of proposer estimates and its plan margin, on scripted trees."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import pyaccel
from pyaccel.methods.auto.calibration import Calibration, CalibrationTuning
from pyaccel.methods.auto import Candidate
from pyaccel.methods.auto.merge import MergedTree, cap_siblings, merge_trees
from pyaccel.methods.auto.policy import AutoTuning, may_pay, pass_costs, pay_threshold, plan_tree
from pyaccel.methods.lookup.proposer import LookupTuning
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
    """Verification accepting far more than predicted leaves the estimates as they are:
    evidence from where a proposer drafted would raise its estimates everywhere else too."""
    tree = two_source_tree()
    lookup_nodes = np.flatnonzero(np.asarray([tree.sources[o] for o in tree.owner]) == "lookup")
    cal = Calibration(CalibrationTuning(decay=1.0))
    for _ in range(50):  # every verified lookup node kept: 1.0, 1.0, 1.0 against 0.5, 0.25, 0.125
        cal.record(tree, lookup_nodes, lookup_nodes)
    assert np.all(cal.ratio("lookup") > 1.5)  # the record itself says "too low"
    assert cal.apply(tree).tolist() == pytest.approx(tree.path_probs.tolist())


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
                            tuning=AutoTuning(plan_margin=margin),
                            costs=pyaccel.CostModel.fixed(curve))
        auto.begin([1, 2, 3], SamplingConfig())
        assert len(auto.propose([1, 2, 3], budget=32)) == drafts
    with pytest.raises(ValueError, match="plan_margin"):
        pyaccel.Auto(tuning=AutoTuning(plan_margin=1.5))
    with pytest.raises(ValueError, match="edges"):
        Calibration(CalibrationTuning(edges=(0.5, 0.2)))
    with pytest.raises(ValueError, match="min_seen"):
        pyaccel.Auto(lookup=False, tuning=AutoTuning(prompt_lookup=LookupTuning(min_seen=0)))


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
    tree = two_source_tree()
    for kept in range(3):
        cal = Calibration(CalibrationTuning(decay=1.0))
        cal.record(tree, np.arange(len(tree)), np.arange(kept))
        for cand in _random_candidates(rng):
            cand = Candidate(cand.tokens, cand.parents, cand.path_probs, "lookup", learnt=bool(rng.integers(2)))
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
