"""The one decode loop with a toy proposer: output stays plain greedy, tau is as predicted."""

from __future__ import annotations

import numpy as np
import pytest

import pyaccel
from pyaccel.types import Draft

from lossless import assert_greedy_equivalent

PROMPT = "def quicksort(items):\n"
N_TOKENS = 48


class ReplayProposer(pyaccel.Proposer):
    """Drafts the known plain greedy continuation, corrupting every `corrupt_every`-th token.

    tree=True: every corrupted position gets two children, [wrong, right], and the chain
    continues under the right one, so the kept path is often not the first one.
    """

    name = "replay"

    def __init__(self, reference: list[int], n_prompt: int, k: int, corrupt_every: int, tree: bool = False) -> None:
        self.reference, self.n_prompt, self.k, self.corrupt_every, self.tree = reference, n_prompt, k, corrupt_every, tree

    def _bad(self, pos: int) -> bool:
        return pos % self.corrupt_every == self.corrupt_every - 1

    def propose(self, tokens: list[int], budget: int) -> Draft:
        start = len(tokens) - self.n_prompt  # index in reference of the first drafted token
        want = self.reference[start : start + min(self.k, budget)]
        toks: list[int] = []
        parents: list[int] = []
        tip = -1
        for j, tok in enumerate(want):
            if self._bad(start + j):
                toks.append(tok + 1)
                parents.append(tip)
                if not self.tree or len(toks) >= budget:
                    break
            toks.append(tok)
            parents.append(tip)
            tip = len(toks) - 1
            if len(toks) >= budget:
                break
        return Draft(np.asarray(toks, np.int32), np.asarray(parents, np.int32))


def expected_forwards(n_new: int, k: int, corrupt_every: int, tree: bool) -> int:
    """Replays ReplayProposer and the acceptance rule on positions alone: a step keeps the
    right tokens drafted before the first corrupted one (tree: the right sibling too)."""
    produced, forwards = 1, 0  # the first token comes from the prefill
    while produced < n_new:
        budget = n_new - produced - 1
        nodes = kept = 0
        for j in range(min(k, budget)):
            if (produced + j) % corrupt_every == corrupt_every - 1:
                nodes += 1
                if not tree or nodes >= budget:
                    break
            nodes += 1
            kept += 1
            if nodes >= budget:
                break
        produced += kept + 1
        forwards += 1
    return forwards


@pytest.fixture(scope="module")
def plain(gemma: pyaccel.Model) -> tuple[list[int], list[int]]:
    prompt = gemma.tokenize(PROMPT)
    result = pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=N_TOKENS)
    assert len(result.tokens) == N_TOKENS
    return prompt, result.tokens


@pytest.mark.parametrize(("k", "corrupt_every", "tree"), [(4, 5, False), (8, 3, False), (6, 4, True)])
def test_replay_gives_plain_output_and_expected_tau(gemma: pyaccel.Model, plain, k: int, corrupt_every: int,
                                                    tree: bool) -> None:
    prompt, reference = plain
    proposer = ReplayProposer(reference, len(prompt), k, corrupt_every, tree)
    result = pyaccel.Generator(gemma, proposer).generate(prompt, max_tokens=N_TOKENS)
    identical = assert_greedy_equivalent(gemma, prompt, reference, result.tokens)
    if identical:
        forwards = expected_forwards(N_TOKENS, k, corrupt_every, tree)
        assert result.stats.target_forwards == forwards
        assert result.stats.tau == pytest.approx((N_TOKENS - 1) / forwards)
        assert result.stats.tau > 1.5
    assert result.stats.accepted <= result.stats.drafted


def test_stream_with_drafts_matches_generate(gemma: pyaccel.Model, plain) -> None:
    prompt, reference = plain
    gen = pyaccel.Generator(gemma, ReplayProposer(reference, len(prompt), 5, 4))
    items = list(gen.stream(prompt, max_tokens=N_TOKENS))
    assert "".join(items[:-1]) == items[-1].text


def test_proposer_over_budget_is_an_error(gemma: pyaccel.Model) -> None:
    class Greedy(ReplayProposer):
        def propose(self, tokens: list[int], budget: int) -> Draft:
            return Draft.chain([1] * (budget + 1))

    with pytest.raises(ValueError, match="budget"):
        pyaccel.Generator(gemma, Greedy([], 0, 1, 2)).generate("hi", max_tokens=8)
