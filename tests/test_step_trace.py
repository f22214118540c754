"""`Generator(..., trace=callback)`: every decode step's `StepTrace` against the generation's
own Result and Stats, on a real model: the committed tokens are the output, the drafted and
accepted counts are the Stats', the depths follow the committed tokens."""

from __future__ import annotations

import pytest

import pyaccel
from pyaccel import decode
from pyaccel.types import Draft, StepTrace

PROMPT = "def fibonacci(n):\n"
N_TOKENS = 40
DRAFT = 3


class Echo(pyaccel.Proposer):
    """Drafts the next DRAFT tokens of a known plain output, its last one wrong, so that each
    step keeps at most DRAFT - 1 of them."""

    name = "echo"

    def __init__(self, reference: list[int], n_prompt: int) -> None:
        self.reference, self.n_prompt = reference, n_prompt

    def propose(self, tokens: list[int], budget: int) -> Draft:
        start = len(tokens) - self.n_prompt
        want = self.reference[start:start + min(DRAFT, budget)]
        if len(want) == DRAFT:
            want = want[:-1] + [want[-1] + 1]
        return Draft.chain(want)


def traced(model: pyaccel.Model, method: str | pyaccel.Proposer,
           **kwargs: object) -> tuple[pyaccel.Result, list[StepTrace]]:
    steps: list[StepTrace] = []
    with pyaccel.Generator(model, method, trace=steps.append) as gen:
        result = gen.generate(PROMPT, max_tokens=N_TOKENS, temperature=0.0, **kwargs)
    return result, steps


def check_against_stats(result: pyaccel.Result, steps: list[StepTrace], n_prompt: int) -> None:
    s = result.stats
    assert len(steps) == s.target_forwards and [t.index for t in steps] == list(range(len(steps)))
    assert sum(t.committed for t in steps) == s.decoded_tokens
    committed = [tok for t in steps for tok in t.tokens]
    assert committed[:len(result.tokens) - 1] == result.tokens[1:]  # the first token is the prefill's
    assert sum(t.accepted for t in steps) == s.accepted and sum(t.drafted for t in steps) == s.drafted
    depth = n_prompt  # the prompt, then every committed token before the step
    for t in steps:
        assert t.depth == depth and t.committed == len(t.tokens) and t.accepted <= min(t.drafted, t.committed)
        assert t.batch >= 1 + t.drafted
        assert 0 <= t.target_s <= t.step_s and 0 <= t.propose_s <= t.step_s and t.verify_s >= 0
        depth += t.committed


@pytest.mark.model
def test_a_plain_runs_trace_is_one_token_a_step(gemma: pyaccel.Model) -> None:
    result, steps = traced(gemma, "plain")
    check_against_stats(result, steps, len(gemma.tokenize(PROMPT)))
    assert all(t.batch == 1 and t.drafted == 0 and t.committed == 1 for t in steps)
    assert len(result.tokens) == N_TOKENS and len(steps) == N_TOKENS - 1


@pytest.mark.model
def test_a_drafting_runs_trace_matches_its_stats(gemma: pyaccel.Model) -> None:
    plain = pyaccel.Generator(gemma, "plain").generate(PROMPT, max_tokens=N_TOKENS, temperature=0.0)
    n_prompt = len(gemma.tokenize(PROMPT))
    result, steps = traced(gemma, Echo(plain.tokens, n_prompt))
    check_against_stats(result, steps, n_prompt)
    assert max(t.drafted for t in steps) == DRAFT and max(t.accepted for t in steps) == DRAFT - 1
    assert result.stats.accepted > 0 and len(steps) < N_TOKENS - 1  # fewer passes than plain decoding's


@pytest.mark.model
def test_tokens_kept_past_a_stop_are_not_counted(gemma: pyaccel.Model) -> None:
    plain = pyaccel.Generator(gemma, "plain").generate(PROMPT, max_tokens=N_TOKENS, temperature=0.0)
    stop = gemma.detokenize(plain.tokens[6:8])  # inside a draft of the Echo proposer
    result, steps = traced(gemma, Echo(plain.tokens, len(gemma.tokenize(PROMPT))), stop=stop)
    assert result.finish_reason == "stop"
    check_against_stats(result, steps, len(gemma.tokenize(PROMPT)))


@pytest.mark.model
def test_without_a_trace_no_step_is_recorded(gemma: pyaccel.Model, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("a step was recorded without a trace")

    monkeypatch.setattr(decode._Mark, "of", refuse)
    with pyaccel.Generator(gemma, "lookup") as gen:
        assert gen.trace is None
        assert len(gen.generate(PROMPT, max_tokens=8, temperature=0.0).tokens) == 8


@pytest.mark.model
def test_what_a_trace_raises_ends_the_generation(gemma: pyaccel.Model) -> None:
    def fail(step: StepTrace) -> None:
        raise RuntimeError(f"stop at {step.index}")

    with pyaccel.Generator(gemma, "plain", trace=fail) as gen, pytest.raises(RuntimeError, match="stop at 0"):
        gen.generate(PROMPT, max_tokens=8, temperature=0.0)


def test_a_trace_must_be_callable() -> None:
    with pytest.raises(TypeError, match="trace must be a callable taking a pyaccel.StepTrace"):
        pyaccel.Generator("no-such-model.gguf", "plain", trace=[])  # type: ignore[arg-type]
