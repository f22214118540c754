"""method="auto": the tree merge, the policy on scripted proposers, and real-model losslessness."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import pytest

import pyaccel
from pyaccel import defaults
from pyaccel.methods import make_method
from pyaccel.methods.auto import Candidate
from pyaccel.methods.auto.merge import cap_siblings, merge_trees
from pyaccel.methods.auto.policy import AutoTuning, draft_may_pay
from pyaccel.types import Draft, SamplingConfig, StepOutcome

from lossless import assert_greedy_equivalent, chi_square_pvalue, second_token_counts, target_distribution

# The reference curve of docs/design.md (Qwen2.5-Coder-1.5B on 2 CPU cores, steep), interpolated
# between its sizes; a GPU-like flat one; one with no batching gain.
_SIZES = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32]
_TIMES = [1.00, 1.73, 2.34, 2.90, 3.38, 4.01, 6.95, 7.96, 8.29, 8.31, 10.9, 12.9, 15.4]
CPU = np.interp(np.arange(1, 33), _SIZES, _TIMES).tolist()
FLAT = [1.0 + 0.01 * b for b in range(64)]
LINEAR = [float(b) for b in range(1, 65)]


def chain(tokens: Sequence[int], alpha: float, source: str) -> Candidate:
    """A chain whose every position is accepted with `alpha` given the one before."""
    return Candidate.chain(tokens, np.cumprod([alpha] * len(tokens)), source)


# ---- the merge ---------------------------------------------------------------------------------


def test_shared_prefixes_become_one_node_with_the_larger_estimate() -> None:
    a = chain([5, 6, 7], 0.9, "lookup")
    b = chain([5, 6, 8], 0.5, "lookahead")
    tree = merge_trees([b, a], max_leaves=8)
    assert tree.tokens.tolist() == [5, 6, 7, 8]  # the likelier candidate first
    assert tree.parents.tolist() == [-1, 0, 1, 1]
    assert tree.path_probs[:2] == pytest.approx([0.9, 0.81])
    assert [tree.sources[k] for k in tree.owner] == ["lookup", "lookup", "lookup", "lookahead"]
    assert tree.shared.tolist() == [True, True, False, False]
    # 7 and 8 are exclusive continuations of [5, 6]: 0.729 + 0.125 > 0.81, so 8 gets what 7 leaves.
    assert tree.path_probs[2:].tolist() == pytest.approx([0.729, 0.81 - 0.729])
    # Each proposer's own estimate of each node it put there; -1 where it did not.
    assert tree.held[:, tree.sources.index("lookup")].tolist() == pytest.approx([0.9, 0.81, 0.729, -1.0])
    assert tree.held[:, tree.sources.index("lookahead")].tolist() == pytest.approx([0.5, 0.25, -1.0, 0.125])
    assert not tree.held_learnt.any()


def test_a_proposer_offering_a_node_twice_is_held_at_its_larger_estimate() -> None:
    low, high = chain([5, 6], 0.3, "lookahead"), chain([5, 9], 0.6, "lookahead")
    learnt = replace(Candidate.chain([5], np.array([0.95]), "lookup"), learnt=True)
    tree = merge_trees([low, high, learnt], max_leaves=8)
    root = tree.tokens.tolist().index(5)
    assert tree.held[root, tree.sources.index("lookahead")] == pytest.approx(0.6)
    assert tree.held_learnt[root].tolist() == [s == "lookup" for s in tree.sources]


def test_a_tree_candidate_keeps_its_shape() -> None:
    lookup = Candidate(np.array([1, 2, 3], np.int32), np.array([-1, 0, -1], np.int32), np.array([0.6, 0.5, 0.3]),
                       "lookup")
    tree = merge_trees([lookup, chain([3, 4], 0.2, "ngram")], max_leaves=8)
    assert tree.tokens.tolist() == [1, 2, 3, 4] and tree.parents.tolist() == [-1, 0, -1, 2]
    assert tree.path_probs.tolist() == pytest.approx([0.6, 0.5, 0.3, 0.04])  # the ngram's 0.2 < lookup's 0.3


def test_the_merge_keeps_to_the_paths_the_pass_holds() -> None:
    cands = [chain([t, t + 1], 0.5 - 0.01 * t, "x") for t in range(10, 20, 2)]
    tree = merge_trees(cands, max_leaves=3)
    roots = tree.tokens[tree.parents < 0].tolist()
    assert roots == [10, 12, 14]  # the three likeliest; the others would need more sequences
    assert len(tree) == 6
    extended = merge_trees([chain([1], 0.9, "x"), chain([1, 2, 3], 0.5, "y")], max_leaves=1)
    assert extended.tokens.tolist() == [1, 2, 3]  # extending a leaf adds no path


def test_sibling_cap_keeps_the_likeliest_and_scales_the_rest_with_their_subtrees() -> None:
    parents = np.array([-1, -1, 0, 1], np.int32)
    probs = cap_siblings(parents, np.array([0.6, 0.8, 0.4, 0.3]))
    assert probs.tolist() == pytest.approx([0.2, 0.8, 0.4 / 3, 0.3])  # 0.6 -> 0.2: its child by 1/3 too
    untouched = np.array([0.5, 0.3, 0.2])
    assert cap_siblings(np.array([-1, -1, 0], np.int32), untouched).tolist() == untouched.tolist()


def _capped_by_brute_force(parents: list[int], probs: list[float]) -> list[float]:
    """The rule written out per node: walk siblings likeliest first (ties: node order), each
    taking at most what its parent has left, with its raw subtree scaled by the same factor."""
    out = list(probs)
    factor = [1.0] * len(probs)
    for par in [-1, *range(len(probs))]:
        kids = [i for i, p in enumerate(parents) if p == par]
        left = 1.0 if par < 0 else out[par]
        inherited = 1.0 if par < 0 else factor[par]
        for i in sorted(kids, key=lambda i: (-probs[i] * inherited, i)):
            out[i] = min(probs[i] * inherited, max(left, 0.0))
            factor[i] = out[i] / probs[i] if probs[i] else 0.0
            left -= out[i]
    return out


def test_sibling_cap_matches_the_rule_and_never_raises_an_estimate() -> None:
    rng = np.random.default_rng(3)
    for trial in range(400):
        n = int(rng.integers(1, 9 if trial < 200 else 80))  # a step's tree has up to ~130 nodes
        parents = [-1] + [int(rng.integers(-1, i)) for i in range(1, n)]
        probs = [float(x) for x in rng.uniform(0.0, 1.0, n)]
        if trial % 3 == 0:  # ties between siblings go to node order
            probs = [round(x, 1) for x in probs]
        for i, par in enumerate(parents):  # a path estimate never grows along its path
            if par >= 0:
                probs[i] = min(probs[i], probs[par])
        capped = cap_siblings(np.array(parents, np.int32), np.array(probs))
        assert capped.tolist() == _capped_by_brute_force(parents, probs)  # the same arithmetic, exactly
        assert np.all(capped <= np.array(probs) + 1e-12)
        for par in [-1, *range(n)]:
            kids = [i for i, p in enumerate(parents) if p == par]
            assert sum(capped[kids]) <= (1.0 if par < 0 else capped[par]) + 1e-9


# ---- the policy on scripted proposers ------------------------------------------------------------


class Scripted:
    """A proposer offering fixed candidates (what a real one computes from the text)."""

    def __init__(self, name: str, candidates: list[Candidate]) -> None:
        self.name = name
        self.offered = candidates
        self.observed: list[list[int]] = []

    def bind(self, target: object) -> None:
        pass

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        pass

    def candidates(self, tokens: list[int], budget: int) -> list[Candidate]:
        return self.offered

    def observe(self, outcome: StepOutcome) -> None:
        self.observed.append(outcome.accepted_tokens + [outcome.next_token])

    def end(self) -> None:
        pass

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


def scripted_auto(curve: list[float], *proposers: Scripted) -> pyaccel.Auto:
    auto = pyaccel.Auto(lookup=False, lookahead=False, use_draft=False, extra=proposers,
                        costs=pyaccel.CostModel.fixed(curve))
    auto.begin([1, 2, 3], SamplingConfig())
    return auto


def drafted_by(auto: pyaccel.Auto) -> dict[str, int]:
    """Drafted nodes per proposer (the counters after one step)."""
    return {k[len("drafted_"):]: int(v) for k, v in auto.counters.items() if k.startswith("drafted_")}


class Bounded(Scripted):
    """A scripted proposer that bounds its estimates (`best_estimate`), as the pool does."""

    def __init__(self, name: str, candidates: list[Candidate], best: float) -> None:
        super().__init__(name, candidates)
        self.best, self.asked = best, 0

    def best_estimate(self) -> float:
        return self.best

    def candidates(self, tokens: list[int], budget: int) -> list[Candidate]:
        self.asked += 1
        return super().candidates(tokens, budget)


@pytest.mark.parametrize("curve, best, asked", [(CPU, 0.3, [16, 32]), (FLAT, 0.3, list(range(1, 41))),
                                                (CPU, 0.95, list(range(1, 41)))])
def test_a_proposer_that_cannot_pay_is_asked_only_as_a_probe(curve: list[float], best: float,
                                                             asked: list[int]) -> None:
    """Where its best estimate cannot pay on the curve (CPU), a bounded proposer offers
    candidates, and learns from the outcome, once every probe_every steps; where it can (a
    flat curve, or a high estimate), every step."""
    pool = Bounded("pool", [chain([20, 21], best, "pool")], best)
    auto = scripted_auto(curve, pool)
    seen = []
    for step in range(1, 41):
        before = pool.asked
        draft = auto.propose([1, 2, 3], budget=32)
        auto.observe(StepOutcome(draft, [], 99, 3, np.zeros((1 + len(draft), 4), np.float32)))
        if pool.asked > before:
            seen.append(step)
    assert seen == asked
    assert len(pool.observed) == len(asked)  # observe only on the steps it was asked
    assert auto.counters.get("skipped_pool", 0) == 40 - len(asked)
    with pytest.raises(ValueError, match="probe_every"):
        pyaccel.Auto(tuning=AutoTuning(probe_every=0))


def test_it_picks_the_better_proposer() -> None:
    copy = Scripted("copy", [chain([10, 11, 12, 13, 14, 15], 0.95, "copy")])
    guess = Scripted("guess", [chain([20, 21, 22], 0.3, "guess")])
    auto = scripted_auto(CPU, copy, guess)
    draft = auto.propose([1, 2, 3], budget=32)
    assert draft.tokens.tolist()[:3] == [10, 11, 12]
    assert drafted_by(auto) == {"copy": len(draft)}
    # The other way round when the other proposer is the confident one.
    auto = scripted_auto(CPU, Scripted("copy", [chain([10, 11], 0.3, "copy")]),
                         Scripted("guess", [chain([20, 21, 22, 23], 0.95, "guess")]))
    auto.propose([1, 2, 3], budget=32)
    assert drafted_by(auto) == {"guess": 4}


def test_it_mixes_proposers_where_a_mix_is_better() -> None:
    a = Scripted("a", [chain([10, 11, 12], 0.45, "a")])
    b = Scripted("b", [chain([20, 21, 22], 0.4, "b")])
    auto = scripted_auto(FLAT, a, b)
    auto.propose([1, 2, 3], budget=32)
    assert drafted_by(auto) == {"a": 3, "b": 3}  # on a flat curve both branches pay
    assert auto.counters["mixed_steps"] == 1
    plan_a = pyaccel.CostModel.fixed(FLAT).tree(a.offered[0].path_probs, a.offered[0].parents, 3, 32)
    mixed = pyaccel.CostModel.fixed(FLAT).tree(*_merged(a, b), 3, 32)
    assert mixed.expected_speedup > plan_a.expected_speedup


def _merged(*proposers: Scripted) -> tuple[np.ndarray, np.ndarray]:
    tree = merge_trees([c for p in proposers for c in p.offered], 8)
    return tree.path_probs, tree.parents


def test_it_drafts_nothing_where_nothing_pays() -> None:
    auto = scripted_auto(LINEAR, Scripted("a", [chain([10, 11, 12], 0.9, "a")]),
                         Scripted("b", [chain([20, 21], 0.8, "b")]))
    assert len(auto.propose([1, 2, 3], budget=32)) == 0
    auto = scripted_auto(CPU, Scripted("a", [chain([10, 11], 0.1, "a")]), Scripted("b", [chain([20], 0.1, "b")]))
    assert len(auto.propose([1, 2, 3], budget=32)) == 0
    assert auto.counters["steps"] == 1 and "drafting_steps" not in auto.counters


def test_accepted_tokens_are_credited_to_their_proposer() -> None:
    copy = Scripted("copy", [chain([10, 11, 12], 0.9, "copy")])
    both = Scripted("pool", [chain([10, 11], 0.5, "pool"), chain([30], 0.05, "pool")])
    auto = scripted_auto(FLAT, copy, both)
    draft = auto.propose([1, 2, 3], budget=32)
    node = {int(t): i for i, t in enumerate(draft.tokens)}
    outcome = StepOutcome(draft, [node[10], node[11]], 40, 3, np.zeros((1 + len(draft), 4), np.float32))
    auto.observe(outcome)
    c = auto.counters
    assert c["accepted_copy"] == 2 and c["accepted_shared"] == 2 and "accepted_pool" not in c
    assert c["drafted_copy"] == 3 and c["drafted_pool"] == 1
    assert copy.observed == [[10, 11, 40]]  # every proposer sees the committed tokens


def test_a_merged_draft_chain_is_scored_on_what_the_step_decided() -> None:
    from pyaccel.methods.auto.proposer import _chain_outcome

    step = StepOutcome(Draft.chain([5, 6]), [0, 1], 9, 3, np.zeros((3, 4), np.float32))
    longer = _chain_outcome(step, [5, 6, 7, 8], [5, 6, 9])  # position 3 was never verified
    assert longer.draft.tokens.tolist() == [5, 6, 7] and longer.accepted == [0, 1] and longer.next_token == 9
    wrong = _chain_outcome(step, [4, 6], [5, 6, 9])
    assert len(wrong.draft) == 2 and wrong.accepted == [] and wrong.next_token == 5


def test_proposers_see_the_real_tips_hidden_state() -> None:
    """The committed chain each proposer observes carries the pass's rows of the root and
    the kept nodes, so Medusa heads under auto read the same tip as under method medusa."""
    from pyaccel.methods.auto.proposer import _as_chain

    hidden = np.arange(5 * 2, dtype=np.float32).reshape(5, 2)  # root + 4 tree nodes
    tree = Draft(np.array([7, 8, 9, 10], np.int32), np.array([-1, 0, 0, 2], np.int32))
    step = StepOutcome(tree, [0, 2, 3], 11, 3, np.zeros((5, 4), np.float32), hidden)
    chain = _as_chain(step, [7, 9, 10, 11])
    assert chain.accepted_tokens == [7, 9, 10] and chain.next_token == 11
    np.testing.assert_array_equal(chain.tip_hidden, step.tip_hidden)
    np.testing.assert_array_equal(chain.hidden, hidden[[0, 1, 3, 4]])
    none_kept = _as_chain(StepOutcome(tree, [], 12, 3, np.zeros((5, 4), np.float32), hidden), [12])
    np.testing.assert_array_equal(none_kept.tip_hidden, hidden[0])


def test_the_draft_model_is_not_worth_loading_on_a_steep_curve() -> None:
    tuning = AutoTuning()
    floor = 491_400_064 / 1_117_320_768  # Qwen2.5-Coder 0.5B over 1.5B: the registry pair's bytes
    assert not draft_may_pay(pyaccel.CostModel.fixed(CPU), [0, 2048], floor, tuning)
    assert draft_may_pay(pyaccel.CostModel.fixed(FLAT), [0, 2048], floor, tuning)


def test_auto_is_the_default_and_plain_stays() -> None:
    assert defaults.METHOD == "auto"
    assert isinstance(make_method(defaults.METHOD), pyaccel.Auto)
    assert make_method("plain").name == "plain"
    from pyaccel.cli import build_parser

    assert build_parser().parse_args(["generate", "hi"]).method == "auto"


def test_bad_options_are_clear() -> None:
    with pytest.raises(ValueError, match="draft_alpha"):
        pyaccel.Auto(tuning=AutoTuning(draft_alpha=1.5))
    with pytest.raises(TypeError, match="candidates"):
        pyaccel.Auto(extra=[object()])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="method 'auto'"):
        make_method("auto:length=4")
    with pytest.raises(ValueError, match="plan_margin"):
        make_method("auto:plan_margin=2")


def test_a_spec_sets_auto_tuning_knobs() -> None:
    auto = make_method("auto:plan_margin=0.03,min_seen=3,use_draft=false")
    assert isinstance(auto, pyaccel.Auto)
    assert (auto.tuning.plan_margin, auto.tuning.prompt_lookup.min_seen, auto.use_draft) == (0.03, 3, False)
    assert auto.tuning.draft_max == AutoTuning().draft_max


# ---- real models ---------------------------------------------------------------------------------

SOURCE = '''def area(width, height):
    """Return the area of a rectangle."""
    return width * height
'''
PROMPTS = [
    SOURCE + "\n# The same function again, unchanged:\n",
    "a = [1, 2, 3, 4, 5, 6, 7, 8]\nb = [1, 2, 3, 4, 5, 6, 7, 8]\nc = [1, 2, 3,",
]
N_TOKENS = 40


def test_greedy_output_is_plain(gemma: pyaccel.Model) -> None:
    plain = pyaccel.Generator(gemma, "plain")
    fast = pyaccel.Generator(gemma)  # the default: auto
    assert fast.method.name == "auto"
    drafted = 0
    for text in PROMPTS:
        prompt = gemma.tokenize(text)
        want = plain.generate(prompt, max_tokens=N_TOKENS).tokens
        got = fast.generate(prompt, max_tokens=N_TOKENS)
        assert_greedy_equivalent(gemma, prompt, want, got.tokens)
        drafted += got.stats.drafted
        assert sum(got.stats.accepted_by.values()) == got.stats.accepted  # each credited to a proposer
    c = fast.method.counters
    assert drafted > 0 and c["accepted_lookup"] > 0 and c["draft_model_loaded"] == 0
    assert sum(v for k, v in c.items() if k.startswith("drafted_")) == drafted


class Sibling(Scripted):
    """Offers one token under the root beside whatever the others offer."""

    def __init__(self, token: int) -> None:
        super().__init__("sibling", [])
        self.token = token

    def candidates(self, tokens: list[int], budget: int) -> list[Candidate]:
        return [chain([self.token], 0.9, self.name)]


def test_sampling_distribution_is_the_targets(gemma: pyaccel.Model) -> None:
    # After " np" the prompt goes on with "\n" (prompt lookup and the pool both see it); a
    # scripted proposer confidently offers "." beside it, so the verified tree mixes
    # proposers under one root (the budget of the first step holds the two root children).
    prompt = gemma.tokenize("import numpy as np\nimport numpy as np\nimport numpy as")
    sibling = Sibling(gemma.tokenize(" np.")[-1])
    gen = pyaccel.Generator(gemma, pyaccel.Auto(extra=[sibling], costs=pyaccel.CostModel.fixed(FLAT)))
    counts = second_token_counts(gen, prompt, range(300), temperature=1.0)
    first, observed = max(counts.items(), key=lambda kv: sum(kv[1].values()))
    assert sum(observed.values()) > 150
    c = gen.method.counters
    assert c["mixed_steps"] > 0 and c["drafted_sibling"] > 0 and c["drafted_lookup"] > 0
    assert chi_square_pvalue(observed, target_distribution(gemma, prompt + [first], temperature=1.0)) > 1e-3
