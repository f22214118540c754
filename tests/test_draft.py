"""Draft-model speculative decoding on the real Qwen2.5-Coder pair."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import pyaccel
from pyaccel import CostModel, DraftModel
from pyaccel.methods.draft import DraftTuning

from lossless import assert_greedy_equivalent, chi_square_pvalue, second_token_counts, target_distribution

CHAT = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Explain in two sentences why the sky is blue.",
    "Write a SQL query that returns the ten most recent orders per customer.",
]
CODE = ["def merge_sorted(a: list[int], b: list[int]) -> list[int]:\n", "class Stack:\n    def __init__(self):\n"]
N_TOKENS = 40


@pytest.fixture(scope="module")
def pair_generator(qwen: pyaccel.Model, qwen_draft: pyaccel.Model) -> pyaccel.Generator:
    return pyaccel.Generator(qwen, DraftModel(qwen_draft, length=4))


def _prompts(qwen: pyaccel.Model) -> list[list[int]]:
    return [qwen.chat_prompt([{"role": "user", "content": c}]) for c in CHAT] + [qwen.tokenize(c) for c in CODE]


def test_greedy_output_is_the_targets(qwen: pyaccel.Model, pair_generator: pyaccel.Generator) -> None:
    plain = pyaccel.Generator(qwen, "plain")
    identical = 0
    for prompt in _prompts(qwen):
        want = plain.generate(prompt, max_tokens=N_TOKENS).tokens
        got = pair_generator.generate(prompt, max_tokens=N_TOKENS)
        identical += assert_greedy_equivalent(qwen, prompt, want, got.tokens)
        assert got.stats.drafted > 0 and got.stats.tau > 1.5
    assert identical >= 3  # most outputs identical, the rest differ only at near-ties


def test_tree_drafts_keep_greedy_output(qwen: pyaccel.Model, qwen_draft: pyaccel.Model) -> None:
    gen = pyaccel.Generator(qwen, DraftModel(qwen_draft, length=5, tree=True, tuning=DraftTuning(branch_prob=0.05)))
    prompt = _prompts(qwen)[0]
    want = pyaccel.Generator(qwen, "plain").generate(prompt, max_tokens=N_TOKENS).tokens
    got = gen.generate(prompt, max_tokens=N_TOKENS)
    assert_greedy_equivalent(qwen, prompt, want, got.tokens)
    assert got.stats.drafted > got.stats.target_forwards  # siblings were drafted


def test_registry_pair_is_the_default_draft(qwen_path: Path) -> None:
    with pyaccel.Model("qwen2.5-coder-1.5b-instruct", n_ctx=256) as target:
        method = DraftModel(length=2)
        pyaccel.Generator(target, method)
        assert method.model is not None and method.model.path.name.startswith("qwen2.5-coder-0.5b")
        method.close()


def test_incompatible_pair_is_refused(qwen: pyaccel.Model, gemma: pyaccel.Model) -> None:
    with pytest.raises(pyaccel.IncompatibleModelsError, match="cannot draft"):
        pyaccel.Generator(qwen, DraftModel(gemma, length=2))


def test_auto_refuses_a_named_draft_of_another_tokenizer_before_it_would_load_it(
        qwen: pyaccel.Model, gemma: pyaccel.Model, gemma_path: Path, qwen_draft_path: Path) -> None:
    """auto loads a draft model only where one could pay (never on a steep CPU curve), but
    a draft the caller named that cannot draft at all is refused at once, from its vocabulary."""
    steep = pyaccel.CostModel.fixed([1.0 + 0.9 * k for k in range(65)])
    for draft in (gemma_path, gemma):
        with pytest.raises(pyaccel.IncompatibleModelsError, match="cannot draft"):
            pyaccel.Generator(qwen, pyaccel.Auto(draft=draft, costs=steep))
    auto = pyaccel.Auto(draft=qwen_draft_path, costs=steep)
    pyaccel.Generator(qwen, auto).close()
    assert auto.drafter is None  # the same tokenizer: accepted, and not loaded where it cannot pay


def test_cost_model_declines_a_slow_draft_and_drafts_on_a_flat_curve(qwen: pyaccel.Model, qwen_draft: pyaccel.Model) -> None:
    cpu_like = CostModel.fixed([1.0, 1.73, 2.34, 2.90, 3.38, 4.01, 5.5, 6.95, 7.5])
    assert not cpu_like.can_pay(0, 8, 0.7)
    gen = pyaccel.Generator(qwen, DraftModel(qwen_draft, max_draft=8, costs=cpu_like, draft_cost=0.7))
    result = gen.generate(_prompts(qwen)[3], max_tokens=80)
    assert result.stats.drafted == 0  # not even a probe: a perfect draft could not pay
    flat = CostModel.fixed([1.0 + 0.01 * b for b in range(16)])
    gen = pyaccel.Generator(qwen, DraftModel(qwen_draft, max_draft=8, costs=flat, draft_cost=0.05))
    result = gen.generate(_prompts(qwen)[3], max_tokens=24)
    assert result.stats.drafted > 0 and result.stats.tau > 1.5


def test_a_long_prompt_is_caught_up_once_where_drafting_pays(qwen: pyaccel.Model, qwen_draft: pyaccel.Model) -> None:
    """The draft model's catch-up over the prompt is paid once for the steps after it: on a
    flat curve a prompt of hundreds of tokens must not keep the draft from ever drafting."""
    flat = CostModel.fixed([1.0 + 0.02 * b for b in range(64)])
    code = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\n" * 12
    prompt = qwen.tokenize(code, add_special=False)
    assert len(prompt) > 200
    gen = pyaccel.Generator(qwen, DraftModel(qwen_draft, costs=flat, draft_cost=0.1))
    result = gen.generate(prompt, max_tokens=32, cache_prompt=False)
    assert result.stats.drafted > 0 and result.stats.tau > 1.5


@pytest.mark.parametrize("sampling", [dict(temperature=1.0), dict(temperature=0.7, top_p=0.9)])
def test_sampling_distribution_is_the_targets(qwen: pyaccel.Model, qwen_draft: pyaccel.Model, sampling: dict) -> None:
    """The real pair (q differs from p): the second token went through draft -> verify.
    A deliberately misaligned q row makes this check fail with p ~ 1e-26."""
    gen = pyaccel.Generator(qwen, DraftModel(qwen_draft, length=2))
    prompt = qwen.tokenize("The capital of France is")  # " Paris" first (p ~ 0.5), then a spread
    counts = second_token_counts(gen, prompt, range(320), **sampling)
    first, observed = max(counts.items(), key=lambda kv: sum(kv[1].values()))
    assert sum(observed.values()) > 120
    p = target_distribution(qwen, prompt + [first], **sampling)
    assert chi_square_pvalue(observed, p) > 1e-3


def test_a_draft_model_with_a_smaller_context_drafts_within_it(gemma_path: Path) -> None:
    """Past the draft's own context nothing is drafted: no failure, the target's output."""
    with pyaccel.Model(gemma_path, n_ctx=512, n_threads=1) as target, \
            pyaccel.Model(gemma_path, n_ctx=256, n_threads=1) as small:
        with pytest.warns(UserWarning, match="smaller than the target's"):
            gen = pyaccel.Generator(target, DraftModel(small, length=4))
        prompt = target.tokenize("one two three four " * 100)[:300]
        assert len(prompt) == 300
        want = pyaccel.Generator(target, "plain").generate(prompt, max_tokens=24, cache_prompt=False).tokens
        with warnings.catch_warnings():
            warnings.simplefilter("error", pyaccel.ProposerFailedWarning)
            got = gen.generate(prompt, max_tokens=24, cache_prompt=False)
        assert_greedy_equivalent(target, prompt, want, got.tokens)
        assert got.stats.drafted == 0
