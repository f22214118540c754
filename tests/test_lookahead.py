"""Lookahead decoding on a real model: the window's rows are the columns' own, output
unchanged (greedy, and the sampled distribution), sizing by the cost curve."""

from __future__ import annotations

import numpy as np
import pytest

import pyaccel
from pyaccel import CostModel, Lookahead
from pyaccel.types import StepOutcome

from lossless import (assert_greedy_equivalent, assert_rows_match, chi_square_pvalue, rows_alone,
                      second_token_counts, target_distribution)

CODE = [
    "def is_palindrome(s: str) -> bool:\n    \"\"\"Return True if s reads the same backwards.\"\"\"\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
]
TEXT = ["The three primary colours are red, yellow and blue. The three primary colours of light are"]
N_TOKENS = 40
SMALL = dict(window=3, ngram=4, guesses=3)


class Recording(Lookahead):
    """Lookahead that keeps, for a few steps, the window it evaluated and the rows it got."""

    def propose(self, tokens: list[int], budget: int) -> pyaccel.Draft:
        draft = super().propose(tokens, budget)
        self._cells = [list(row) for row in self._window.cells()] if draft.aux is not None else None
        return draft

    def observe(self, outcome: StepOutcome) -> None:
        if self._cells is not None and len(self.steps) < 3:
            self.steps.append((outcome.n_past, self._cells, np.array(outcome.aux_logits)))
        super().observe(outcome)


def test_window_rows_equal_each_column_decoded_alone(gemma: pyaccel.Model) -> None:
    prompt = gemma.tokenize(CODE[0])
    gemma.cache.truncate(0)
    method = Recording(cost_model=False, **SMALL)
    method.steps = []
    result = pyaccel.Generator(gemma, method).generate(prompt, max_tokens=16)
    history = list(prompt) + list(result.tokens)
    assert len(method.steps) == 3
    w, n = SMALL["window"], SMALL["ngram"]
    for n_past, cells, rows in method.steps:
        assert rows.shape[0] == w  # only the newest level asks for rows
        for i in range(w):
            column = [cells[0][j] for j in range(1, i + 1)] + [cells[lvl][i] for lvl in range(1, n - 1)]
            alone = rows_alone(gemma, history[:n_past], cells[0][0], column)
            assert_rows_match(rows[i:i + 1], alone[-1:])


@pytest.mark.parametrize("options", [dict(cost_model=False, **SMALL), dict(cost_model=False, lookup=True, **SMALL),
                                     dict(cost_model=False, init="random", window=4, ngram=3, guesses=4)],
                         ids=["small", "lookup", "random-init"])
def test_greedy_output_is_plain(gemma: pyaccel.Model, options: dict) -> None:
    plain = pyaccel.Generator(gemma, "plain")
    fast = pyaccel.Generator(gemma, Lookahead(**options))
    for text in CODE + TEXT:
        prompt = gemma.tokenize(text)
        want = plain.generate(prompt, max_tokens=N_TOKENS).tokens
        got = fast.generate(prompt, max_tokens=N_TOKENS)
        assert_greedy_equivalent(gemma, prompt, want, got.tokens)
        assert got.stats.accepted <= got.stats.drafted
    counters = fast.method.counters
    assert counters["window_steps"] > 0 and counters["accepted"] > 0


def test_cost_model_turns_the_window_off_on_a_steep_curve(gemma: pyaccel.Model) -> None:
    prompt = gemma.tokenize(CODE[1])
    tuning = pyaccel.LookaheadTuning(tau={(3, 4, 3): 1.6})
    steep = CostModel.fixed([1.0 + 0.3 * b for b in range(64)])
    gen = pyaccel.Generator(gemma, Lookahead(costs=steep, tuning=tuning))
    want = pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=N_TOKENS).tokens
    got = gen.generate(prompt, max_tokens=N_TOKENS)
    assert gen.method.counters["window_steps"] == 0
    assert_greedy_equivalent(gemma, prompt, want, got.tokens)
    flat = CostModel.fixed([1.0 + 0.001 * b for b in range(64)])
    gen = pyaccel.Generator(gemma, Lookahead(costs=flat, tuning=tuning))
    got = gen.generate(prompt, max_tokens=N_TOKENS)
    assert gen.method.counters["window_steps"] > 0 and gen.method.counters["window"] == 3
    assert_greedy_equivalent(gemma, prompt, want, got.tokens)


def test_too_few_sequences_is_a_clear_error(gemma: pyaccel.Model) -> None:
    with pytest.raises(ValueError, match="n_seq_max=41"):
        pyaccel.Generator(gemma, Lookahead(window=20, ngram=3, guesses=20, cost_model=False))


def test_sampling_distribution_is_the_targets(gemma: pyaccel.Model) -> None:
    # The prompt repeats "import numpy as np": the pool, seeded from it, drafts " np" on.
    prompt = gemma.tokenize("import numpy as np\nimport numpy as np\nimport numpy as")
    gen = pyaccel.Generator(gemma, Lookahead(window=2, ngram=3, guesses=2, cost_model=False))
    counts = second_token_counts(gen, prompt, range(600), temperature=1.0)
    first, observed = max(counts.items(), key=lambda kv: sum(kv[1].values()))
    assert sum(observed.values()) > 300
    assert chi_square_pvalue(observed, target_distribution(gemma, prompt + [first], temperature=1.0)) > 1e-3
