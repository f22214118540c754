"""`pyaccel.bench.replay.simulate` against steps worked out by hand: a run that ended with the
model's end token did not know where its output would end, so its budgets and its last pass
are the run's, not bounded by the output."""

from __future__ import annotations

import pytest

from pyaccel import Draft, Proposer
from pyaccel.bench.replay import simulate
from pyaccel.types import SamplingConfig

OUTPUT = [10, 11, 12, 13, 14]  # the prefill's token, then four decoded
PAST_THE_END = 99


class Oracle(Proposer):
    """Drafts the next `k` true tokens (PAST_THE_END beyond the output), and records each
    step's budget."""

    name = "oracle"

    def __init__(self, output: list[int], k: int) -> None:
        self.output, self.k = output, k
        self.budgets: list[int] = []
        self.prompt_len = 0

    def propose(self, tokens: list[int], budget: int) -> Draft:
        self.budgets.append(budget)
        done = len(tokens) - self.prompt_len
        n = min(budget, self.k)
        return Draft.chain([self.output[i] if i < len(self.output) else PAST_THE_END for i in range(done, done + n)])

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        self.prompt_len = len(prompt)


def linear(depth: int) -> list[float]:
    """A pass with b draft nodes costs 1 + b / 2 single-token passes, at every depth."""
    return [1.0 + b / 2 for b in range(64)]


def test_an_output_at_the_limit_is_replayed_as_before() -> None:
    # done 1: budget 3, drafts 11 12, both kept (cost 2); done 4: budget 0, plain (cost 1).
    oracle = Oracle(OUTPUT, 2)
    sim = simulate(oracle, [1, 2], OUTPUT, linear, max_tokens=len(OUTPUT))
    assert oracle.budgets == [3]
    assert (sim["steps"], sim["cost"], sim["drafted"]) == (2, 3.0, 2)
    assert sim["speedup"] == pytest.approx(4 / 3)
    assert simulate(Oracle(OUTPUT, 2), [1, 2], OUTPUT, linear) == sim  # no limit given: the output's length


def test_an_output_that_ended_early_keeps_the_runs_budgets_and_its_end_pass() -> None:
    # max_tokens 8. done 1: budget 6, drafts 11 12, both kept (cost 2); done 4: budget 3,
    # drafts 14 and a token past the end; 14 is kept and the pass gives the end token (cost 2).
    # Plain decoding: four passes for 11-14 and one for the end token.
    oracle = Oracle(OUTPUT, 2)
    sim = simulate(oracle, [1, 2], OUTPUT, linear, max_tokens=8)
    assert oracle.budgets == [6, 3]
    assert (sim["steps"], sim["cost"], sim["drafted"]) == (2, 4.0, 4)
    assert sim["speedup"] == pytest.approx(5 / 4)
    assert sim["tau"] == pytest.approx(2.0)


def test_a_lost_bet_on_the_end_pass_is_paid() -> None:
    # Plain decoding costs 5 passes; a proposer that drafts only once everything is committed
    # (all of it past the output's end) pays for that draft on the end pass.
    class Late(Oracle):
        def propose(self, tokens: list[int], budget: int) -> Draft:
            done = len(tokens) - self.prompt_len
            return Draft.chain([PAST_THE_END] * 2) if done == len(self.output) else Draft.empty()

    sim = simulate(Late(OUTPUT, 0), [1, 2], OUTPUT, linear, max_tokens=8)
    assert (sim["steps"], sim["cost"]) == (5, 4 * 1.0 + 2.0)
    assert sim["speedup"] == pytest.approx(5 / 6)


def test_a_limit_below_the_output_is_refused() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        simulate(Oracle(OUTPUT, 2), [1, 2], OUTPUT, linear, max_tokens=3)


def test_an_empty_output_has_nothing_to_replay() -> None:
    with pytest.raises(ValueError, match="no decode to replay"):
        simulate(Oracle([], 2), [1, 2], [], linear, max_tokens=8)
