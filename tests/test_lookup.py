"""Prompt lookup on real models: output unchanged, drafts where the answer copies."""

from __future__ import annotations

import numpy as np
import pytest

import pyaccel
from pyaccel import _core
from pyaccel.methods.lookup import LookupTuning, PromptLookup
from pyaccel.methods.lookup.tuning import N_BUCKETS, agreement_bucket
from pyaccel.methods.lookup.rewrites import FRESH, OPENING

TUNING = LookupTuning()
PRIOR_BY_BUCKET, PRIOR_OPENING = TUNING.prior_fresh, TUNING.prior_opening

from lossless import assert_greedy_equivalent, chi_square_pvalue, second_token_counts, target_distribution

SOURCE = '''def area(width, height):
    """Return the area of a rectangle."""
    return width * height


def perimeter(width, height):
    """Return the perimeter of a rectangle."""
    return 2 * (width + height)
'''
COPY_PROMPTS = [
    SOURCE + "\n# The same two functions again, unchanged:\n",
    "Repeat after me exactly: the quick brown fox jumps over the lazy dog, the quick brown fox",
    "a = [1, 2, 3, 4, 5, 6, 7, 8]\nb = [1, 2, 3, 4, 5, 6, 7, 8]\nc = [1, 2, 3,",
]
N_TOKENS = 48


@pytest.mark.parametrize("method", [PromptLookup(length=6), PromptLookup(), PromptLookup(max_candidates=3)],
                         ids=["fixed", "cost-model", "tree"])
def test_greedy_output_is_plain(gemma: pyaccel.Model, method: PromptLookup) -> None:
    plain = pyaccel.Generator(gemma, "plain")
    fast = pyaccel.Generator(gemma, method)
    drafted = 0
    for text in COPY_PROMPTS:
        prompt = gemma.tokenize(text)
        want = plain.generate(prompt, max_tokens=N_TOKENS).tokens
        got = fast.generate(prompt, max_tokens=N_TOKENS)
        assert_greedy_equivalent(gemma, prompt, want, got.tokens)
        drafted += got.stats.drafted
        assert got.stats.accepted <= got.stats.drafted
    assert drafted > 0


RENAME_PROMPT = ("Rename `width` to `breadth` in this code.\n\n```python\n" + SOURCE
                 + "```\n\nThe code with `width` renamed:\n\n```python\n")


@pytest.mark.parametrize("spec", ["lookup", "auto"])
def test_a_quoted_rename_is_read_off_the_prompt_and_the_output_stays_plain(gemma: pyaccel.Model,
                                                                             spec: str) -> None:
    prompt = gemma.tokenize(RENAME_PROMPT)
    want = pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=N_TOKENS).tokens
    fast = pyaccel.Generator(gemma, spec)
    got = fast.generate(prompt, max_tokens=N_TOKENS)
    assert_greedy_equivalent(gemma, prompt, want, got.tokens)
    lookup = fast.method if spec == "lookup" else fast.method.subs[0]
    assert isinstance(lookup, PromptLookup) and lookup._named is not None
    assert lookup._named.quoted == [b"width", b"breadth"]


# A second chat turn after an answer that repeated the question with a word dropped: the
# copy follower learns the drop as an edit (a deletion) and drafts across it.
DROPPED_WORD_CHAT = ("<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"
                     "What is the capital of France? mendatang\nWhat is the capital of France? mendatang\n"
                     "What is the capital of France<end_of_turn>\n<start_of_turn>user\nAnd of Germany?<end_of_turn>\n"
                     "<start_of_turn>model\n")


@pytest.mark.parametrize("spec", ["lookup", "auto"])
def test_a_learnt_deletion_drafts_and_the_output_stays_plain(gemma: pyaccel.Model, spec: str) -> None:
    prompt = gemma.tokenize(DROPPED_WORD_CHAT)
    want = pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=24).tokens
    got = pyaccel.Generator(gemma, spec).generate(prompt, max_tokens=24)
    assert_greedy_equivalent(gemma, prompt, want, got.tokens)


def test_copying_gives_long_accepted_drafts(gemma: pyaccel.Model) -> None:
    gemma.cache.truncate(0)  # a reused prefix changes batch numerics, hence the output
    fast = pyaccel.Generator(gemma, PromptLookup(length=16))
    result = fast.generate(gemma.tokenize(COPY_PROMPTS[2]), max_tokens=N_TOKENS)
    assert result.stats.tau > 4.0


def test_cost_model_sizes_drafts_from_the_curve(gemma: pyaccel.Model) -> None:
    prompt = gemma.tokenize(COPY_PROMPTS[0])
    linear = pyaccel.CostModel.fixed([float(b) for b in range(1, 65)])  # no batching gain at all
    gen = pyaccel.Generator(gemma, PromptLookup(costs=linear))
    assert gen.generate(prompt, max_tokens=N_TOKENS).stats.drafted == 0
    flat = pyaccel.CostModel.fixed([1.0 + 0.01 * b for b in range(64)])  # GPU-like: verification is cheap
    gen = pyaccel.Generator(gemma, PromptLookup(costs=flat))
    # Gemma writes a line of its own before it copies (tau 1.9 on an AVX-512 host, 2+ on AVX2).
    assert gen.generate(prompt, max_tokens=N_TOKENS).stats.tau > 1.5


def test_sampling_distribution_is_the_targets(gemma: pyaccel.Model) -> None:
    # The prompt repeats "import numpy as np", so the lookup drafts " np" and onwards.
    prompt = gemma.tokenize("import numpy as np\nimport numpy as np\nimport numpy as")
    gen = pyaccel.Generator(gemma, PromptLookup(length=3))
    counts = second_token_counts(gen, prompt, range(600), temperature=1.0)
    first, observed = max(counts.items(), key=lambda kv: sum(kv[1].values()))
    assert sum(observed.values()) > 300
    assert chi_square_pvalue(observed, target_distribution(gemma, prompt + [first], temperature=1.0)) > 1e-3


def test_bad_options_are_clear() -> None:
    with pytest.raises(ValueError, match="n_min"):
        PromptLookup(n_min=3, n_max=2)


# ---- the acceptance model, without a model --------------------------------------------------


def test_agreement_buckets_are_half_octaves() -> None:
    assert [agreement_bucket(k) for k in (1, 2, 3, 4, 5, 6, 8, 12, 16, 64, 10**6)] == \
        [0, 2, 3, 4, 4, 5, 6, 7, 8, 12, N_BUCKETS - 1]
    assert len(PRIOR_BY_BUCKET) == N_BUCKETS
    assert list(PRIOR_BY_BUCKET) == sorted(PRIOR_BY_BUCKET)  # a longer agreement is never less likely


@pytest.mark.parametrize("keep", [False, True])
def test_copy_statistics_restart_with_each_prompt_unless_kept(keep: bool) -> None:
    from pyaccel.methods.lookup.proposer import copy_stats

    stats = copy_stats(LookupTuning(keep_copy_stats=keep))
    for _ in range(30):
        stats[FRESH].observe_position(3, False)  # fresh matches': never kept
        stats[OPENING].observe_position(3, False)
    for s in stats:
        s.restart()
    assert stats[FRESH].alpha()[3] == pytest.approx(PRIOR_BY_BUCKET[3])
    assert (stats[OPENING].alpha()[3] < 0.5 * PRIOR_OPENING[3]) == keep


def test_path_probabilities_follow_the_hazard_model() -> None:
    """Best child: h(agreement + depth); other children share 1 - h by support."""
    # "1 2" occurred after "9" once (then 5 6) and twice elsewhere (then 3 4): the copy
    # context ranks 5 6 first although 3 4 is more frequent.
    stream = [9, 1, 2, 5, 6, 8, 1, 2, 3, 4, 7, 1, 2, 3, 4, 9, 1, 2]
    method = PromptLookup(n_max=2, max_candidates=2)
    method.begin(stream, pyaccel.SamplingConfig())
    tree = method._index.lookup(1, 2, 2, 2, 64)
    assert tree.tokens.tolist() == [5, 6, 3, 4] and tree.parents.tolist() == [-1, 0, -1, 2]
    assert tree.contexts.tolist() == [3, 3, 2, 2] and tree.counts.tolist() == [1, 1, 2, 2]
    for relation in (FRESH, OPENING):  # the relation's buckets
        h = method._stats[relation].alpha()
        first, second = h[agreement_bucket(3)], h[agreement_bucket(4)]
        other = (1 - first) * 2 / 3
        expected = [first, first * second, other, other * h[agreement_bucket(3)]]
        np.testing.assert_allclose(_core.lookup_path_probs(tree, h), expected)


def test_copy_statistics_outlive_a_call_and_fresh_ones_do_not() -> None:
    method = PromptLookup()
    method.begin([1, 2, 3], pyaccel.SamplingConfig())
    for _ in range(20):
        method._stats[FRESH].observe_position(0, False)
        method._stats[OPENING].observe_position(6, False)
    low = method._stats[OPENING].alpha()[6]
    assert method._stats[FRESH].alpha()[0] < PRIOR_BY_BUCKET[0] and low < PRIOR_OPENING[6]
    method.begin([1, 2, 3], pyaccel.SamplingConfig())
    assert method._stats[FRESH].alpha()[0] == pytest.approx(PRIOR_BY_BUCKET[0])
    assert method._stats[OPENING].alpha()[6] == pytest.approx(low)
    assert len(method._stats) == 2 and len(PRIOR_OPENING) == N_BUCKETS  # FRESH, OPENING
