"""The proposer contract on a real model: auxiliary tokens ride in the verified pass and
get back the rows a separate decode gives; hidden states reach observe; the lifecycle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pyaccel
from pyaccel.types import AuxTokens, Draft, StepOutcome

from lossless import assert_greedy_equivalent, assert_rows_match, rows_alone

pytestmark = pytest.mark.model

PROMPT = "def fibonacci(n):\n"
N_TOKENS = 24
# Two auxiliary sequences: a chain of two tokens at root + 1, + 2, and one token at root + 1.
AUX_A = [1000, 2000]
AUX_B = [3000]


class Recorder(pyaccel.Proposer):
    """Replays the plain continuation (k tokens a step), optionally with auxiliary tokens,
    and records what every observe() receives (copied: the views die after observe)."""

    name = "recorder"

    def __init__(self, reference: list[int], n_prompt: int, k: int = 3, aux: bool = True) -> None:
        self.reference, self.n_prompt, self.k, self.aux = reference, n_prompt, k, aux
        self.calls: list[str] = []
        self.steps: list[dict] = []

    def begin(self, prompt, sampling) -> None:
        self.calls.append("begin")

    def propose(self, tokens: list[int], budget: int) -> Draft:
        self.calls.append("propose")
        start = len(tokens) - self.n_prompt
        chain = self.reference[start:start + min(self.k, budget)]
        draft = Draft.chain(chain)
        if not self.aux:
            return draft
        aux = AuxTokens.make(AUX_A + AUX_B, [1, 2, 1], [[0], [0], [1]])
        return Draft(draft.tokens, draft.parents, aux=aux)

    def observe(self, outcome: StepOutcome) -> None:
        self.calls.append("observe")
        self.steps.append({
            "n_past": outcome.n_past, "n_draft": len(outcome.draft), "shape": outcome.logits.shape,
            "aux": np.array(outcome.aux_logits), "tip_row": outcome.tip_row,
            "tip_hidden": None if outcome.tip_hidden is None else np.array(outcome.tip_hidden),
            "hidden_shape": None if outcome.hidden is None else outcome.hidden.shape,
        })

    def end(self) -> None:
        self.calls.append("end")


@pytest.fixture(scope="module")
def plain(gemma: pyaccel.Model) -> tuple[list[int], list[int]]:
    prompt = gemma.tokenize(PROMPT)
    gemma.cache.truncate(0)
    return prompt, pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=N_TOKENS).tokens


def test_auxiliary_rows_equal_a_separate_decode(gemma: pyaccel.Model, plain) -> None:
    prompt, reference = plain
    gemma.cache.truncate(0)
    rec = Recorder(reference, len(prompt))
    result = pyaccel.Generator(gemma, rec).generate(prompt, max_tokens=N_TOKENS)
    # Every proposed step carries the 3 auxiliary rows (a step with no budget proposes nothing).
    assert rec.steps and all(s["shape"][0] == 1 + s["n_draft"] + 3 for s in rec.steps if s["n_draft"])
    history = list(prompt) + list(result.tokens)
    for step in rec.steps[:3]:
        n_past = step["n_past"]
        context, root = history[:n_past], history[n_past]
        assert_rows_match(step["aux"][:2], rows_alone(gemma, context, root, AUX_A))
        assert_rows_match(step["aux"][2:], rows_alone(gemma, context, root, AUX_B))


def test_auxiliary_tokens_leave_verification_alone(gemma: pyaccel.Model, plain) -> None:
    prompt, reference = plain
    gemma.cache.truncate(0)
    with_aux = pyaccel.Generator(gemma, Recorder(reference, len(prompt))).generate(prompt, max_tokens=N_TOKENS)
    gemma.cache.truncate(0)
    without = pyaccel.Generator(gemma, Recorder(reference, len(prompt), aux=False)).generate(prompt,
                                                                                             max_tokens=N_TOKENS)
    # The cache holds the committed tokens only: a next call reuses the prefix and is plain.
    again = pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=N_TOKENS)
    assert again.stats.cached_prompt_tokens == len(prompt) - 1
    assert_greedy_equivalent(gemma, prompt, reference, again.tokens)
    assert_greedy_equivalent(gemma, prompt, reference, with_aux.tokens)
    assert with_aux.stats.drafted == without.stats.drafted  # auxiliary tokens are not draft nodes
    if with_aux.tokens == without.tokens:
        assert with_aux.stats.target_forwards == without.stats.target_forwards


def test_hidden_state_at_the_last_kept_node(gemma_path: Path) -> None:
    with pyaccel.Model(gemma_path, n_ctx=512, embeddings=True) as model:
        prompt = model.tokenize(PROMPT)
        reference = pyaccel.Generator(model, "plain").generate(prompt, max_tokens=N_TOKENS).tokens
        model.cache.truncate(0)
        rec = Recorder(reference, len(prompt), aux=False)
        result = pyaccel.Generator(model, rec).generate(prompt, max_tokens=N_TOKENS)
        n_embd = model.backend.n_embd
        history = list(prompt) + list(result.tokens)
        for step in rec.steps[:3]:
            assert step["hidden_shape"] == (1 + step["n_draft"], n_embd)
            tip = step["n_past"] + step["tip_row"]  # the position of the last kept token
            model.cache.truncate(0)
            model.backend.prefill(history[:tip + 1], start_pos=0)
            want = np.array(model.backend.embeddings_rows()[-1])
            got = step["tip_hidden"]
            cosine = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
            assert cosine > 0.99, cosine
        model.cache.truncate(0)


def test_no_hidden_states_without_embeddings(gemma: pyaccel.Model, plain) -> None:
    prompt, reference = plain
    rec = Recorder(reference, len(prompt), aux=False)
    pyaccel.Generator(gemma, rec).generate(prompt, max_tokens=8)
    assert all(s["tip_hidden"] is None and s["hidden_shape"] is None for s in rec.steps)


def test_lifecycle_order_and_end_after_an_error(gemma: pyaccel.Model, plain) -> None:
    prompt, reference = plain
    rec = Recorder(reference, len(prompt), aux=False)
    pyaccel.Generator(gemma, rec).generate(prompt, max_tokens=8)
    assert rec.calls[0] == "begin" and rec.calls[-1] == "end"
    assert rec.calls[1:-1] == ["propose", "observe"] * ((len(rec.calls) - 2) // 2)

    class Broken(Recorder):
        def propose(self, tokens, budget):
            super().propose(tokens, budget)
            return Draft.chain([gemma.n_vocab + 5])

    broken = Broken(reference, len(prompt), aux=False)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        pyaccel.Generator(gemma, broken).generate(prompt, max_tokens=8)
    assert broken.calls[-1] == "end"
    after = pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=N_TOKENS)  # the model is still usable
    assert_greedy_equivalent(gemma, prompt, reference, after.tokens)


def test_a_precomputed_layout_is_used(gemma: pyaccel.Model, plain) -> None:
    prompt, reference = plain

    class Static(Recorder):
        layout = pyaccel._core.tree_layout(np.arange(-1, 2, dtype=np.int32))

        def propose(self, tokens, budget):
            d = super().propose(tokens, budget)
            if len(d) != 3:
                return d
            return Draft(d.tokens, d.parents, layout=self.layout)

    result = pyaccel.Generator(gemma, Static(reference, len(prompt), aux=False)).generate(prompt, max_tokens=N_TOKENS)
    assert_greedy_equivalent(gemma, prompt, reference, result.tokens)
    assert result.stats.tau > 2.0


def test_proposers_must_derive_from_the_base(gemma: pyaccel.Model) -> None:
    class Duck:
        name = "duck"

    with pytest.raises(TypeError, match="pyaccel.Proposer"):
        pyaccel.Generator(gemma, Duck())  # type: ignore[arg-type]
    counters = pyaccel.PromptLookup().counters
    with pytest.raises(TypeError):
        counters["x"] = 1  # type: ignore[index]
