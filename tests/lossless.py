"""The greedy "lossless" check of docs/design.md ("Numerics and near-ties"), shared by every
method's tests.

llama.cpp's logits depend slightly on how many tokens share a batch, so an accelerated
greedy run must equal plain greedy decoding, or first differ where plain decoding's top-1 /
top-2 logit gap was small (a near-tie).
"""

from __future__ import annotations

import numpy as np

import pyaccel
from pyaccel.bench.equality import NEAR_TIE, Equality, classify, first_difference, top2_gap

__all__ = ["NEAR_TIE", "first_difference", "top2_gap"]  # re-exported for the method tests


def assert_greedy_equivalent(model: pyaccel.Model, prompt: list[int], plain: list[int], fast: list[int]) -> bool:
    """True when identical; passes at a near-tie divergence; fails otherwise (the bench's
    own classifier, `pyaccel.bench.equality`)."""
    verdict = classify(plain, fast, lambda i: top2_gap(model, prompt, plain[:i]))
    assert verdict.equality is not Equality.REAL, verdict.describe()
    return verdict.equality is Equality.IDENTICAL


def rows_alone(model: pyaccel.Model, context: list[int], root: int, aux: list[int]) -> np.ndarray:
    """Logits of `aux` decoded alone after context + root, in one batch of their own."""
    model.cache.truncate(0)
    backend = model.backend
    backend.prefill(context, start_pos=0)
    n = len(context)
    backend.decode([root] + aux, np.arange(n, n + 1 + len(aux)), logits=np.ones(1 + len(aux), np.int8))
    rows = np.array(backend.logits_rows()[1:])
    model.cache.truncate(0)
    return rows


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x - x.max() - np.log(np.exp(x - x.max()).sum())


def assert_rows_match(got: np.ndarray, want: np.ndarray) -> None:
    """Same argmax, or a near-tie in the reference; the log-probabilities of the
    reference's likeliest tokens within batch-numerics noise (a row of another position or
    context would differ by far more)."""
    for g, w in zip(got, want):
        top = np.sort(w)[-2:]
        assert int(np.argmax(g)) == int(np.argmax(w)) or top[1] - top[0] < NEAR_TIE
        likely = np.argsort(w)[-20:]
        assert np.max(np.abs(_log_softmax(g)[likely] - _log_softmax(w)[likely])) < 1.0


def second_token_counts(gen: pyaccel.Generator, prompt: list[int], seeds: range, **sampling: float) -> dict[int, dict[int, int]]:
    """For each seed, generate a few tokens; count the second token per first token.

    The first token comes from the prefill; the second went through the method's
    propose -> verify step (a draft of up to 2 nodes fits the token budget), so its
    distribution tests the method end to end."""
    counts: dict[int, dict[int, int]] = {}
    drafted = 0
    for seed in seeds:
        result = gen.generate(prompt, max_tokens=4, seed=seed, **sampling)
        tokens, drafted = result.tokens, drafted + result.stats.drafted
        if len(tokens) >= 2:
            per_first = counts.setdefault(tokens[0], {})
            per_first[tokens[1]] = per_first.get(tokens[1], 0) + 1
    assert drafted > len(seeds), "the method drafted (almost) nothing: this would test plain decoding"
    return counts


def target_distribution(model: pyaccel.Model, context: list[int], **sampling: float) -> np.ndarray:
    """The target's exact next-token distribution after `context`, through the same transforms."""
    from pyaccel import _core

    model.cache.truncate(0)
    model.backend.prefill(context, start_pos=0)
    row = np.array(model.backend.logits_rows()[-1])
    model.cache.truncate(0)
    params = _core.SamplingParams(temperature=sampling.get("temperature", 0.0), top_k=int(sampling.get("top_k", 0)),
                                  top_p=sampling.get("top_p", 1.0), min_p=sampling.get("min_p", 0.0))
    return _core.probs(row, params)


def chi_square_pvalue(observed: dict[int, int], p: np.ndarray, min_expected: float = 5.0) -> float:
    """Pearson chi-square of token counts against p, pooling rare tokens into one bin."""
    from scipy.stats import chi2

    total = sum(observed.values())
    expected = p * total
    big = np.flatnonzero(expected >= min_expected)
    obs = [observed.get(int(t), 0) for t in big]
    exp = list(expected[big])
    rest_obs, rest_exp = total - sum(obs), total - sum(exp)
    if rest_exp >= min_expected or rest_obs > 0:
        obs.append(rest_obs)
        exp.append(max(rest_exp, 1e-9))
    o = np.asarray(obs, dtype=np.float64)
    e = np.asarray(exp, dtype=np.float64) * (o.sum() / sum(exp))
    return float(chi2.sf(((o - e) ** 2 / e).sum(), df=len(o) - 1))
