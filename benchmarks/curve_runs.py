"""What the modelled benchmarks share: one greedy generation with a method's instance
patched for its duration, its passes logged, and a batch priced on the measured cost curve."""

from __future__ import annotations

from typing import Any

from pyaccel import Generator, Model
from pyaccel.types import Result, StepOutcome

CATEGORIES = ("writing roleplay reasoning math coding extraction stem humanities translation summarization qa "
              "math_reasoning rag").split()
FLOOR_SUITES = [f"specbench:{c}" for c in CATEGORIES] + ["code"]


def batch_cost(model: Model, depth: int, batch: int) -> float:
    """A `batch`-token pass behind `depth` cached tokens, in single-token times."""
    times = model.costs.curve(depth).times
    return float(times[batch - 1] / times[0])


def patched_greedy(gen: Generator, prompt: list[int], max_tokens: int, **patches: Any) -> Result:
    """One greedy generation on `gen` (reset first) with `patches` set on its method's
    instance, shadowing the class's methods; the class's own again afterwards."""
    method = gen.method
    for name, fn in patches.items():
        setattr(method, name, fn)
    try:
        gen.reset()
        return gen.generate(prompt, max_tokens=max_tokens, temperature=0.0)
    finally:
        for name in patches:
            delattr(method, name)


def logged_passes(gen: Generator, prompt: list[int], max_tokens: int) -> tuple[Result, list[dict[str, int]]]:
    """One greedy generation on `gen` and, per target pass after the prefill: its depth
    (tokens before it, the root included), root index in the output, drafted and accepted
    tokens. Logged where the loop reports each pass (`observe`), so a pass that drafted
    nothing because the budget was spent (no `propose` call) is counted too."""
    passes: list[dict[str, int]] = []
    observe = gen.method.observe

    def logged(outcome: StepOutcome) -> None:
        passes.append({"depth": outcome.n_past + 1, "root": outcome.n_past - len(prompt),
                       "drafted": len(outcome.draft), "accepted": len(outcome.accepted)})
        observe(outcome)

    res = patched_greedy(gen, prompt, max_tokens, observe=logged)
    return res, passes
