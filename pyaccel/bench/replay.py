"""Replay a greedy proposer against recorded plain greedy outputs, without the model.

Under greedy decoding an n-gram proposer's outcome is fully determined by the plain
output: this replays `pyaccel bench --json` results (plain's tokens per prompt), runs the
proposer step by step, accepts the longest draft path that matches the output, and prices
each step with the measured cost curve at its context depth. Its simulated speedup and
the oracle bound use the same curves, so proposer changes can be compared in seconds
instead of a benchmark hour.

    python -m pyaccel.bench.replay bench-results/edit7.json [--option key=value ...] [--tuning key=value ...]

--option sets a PromptLookup argument (max_draft=32); --tuning a `LookupTuning` or
`FollowerTuning` field (stats_decay=0.99, min_seen=3).
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
from typing import Any, Callable, Sequence

import numpy as np

from ..methods.base import Proposer
from ..methods.lookup import LookupTuning, PromptLookup
from ..methods.spec import parse_value
from ..methods.tuning import replace_fields
from ..model import Model
from ..types import Draft, SamplingConfig, StepOutcome
from .oracle import oracle_speedup
from .suites import load_suite

NO_ROWS = np.zeros((0, 0), dtype=np.float32)  # a replay has no logits to show the proposer


def accept_path(draft: Draft, future: Sequence[int]) -> list[int]:
    """Greedy verification: node indices of the longest root path equal to `future`."""
    path: list[int] = []
    parent = -1
    for tok in future:
        nxt = [i for i in range(len(draft)) if draft.parents[i] == parent and draft.tokens[i] == tok]
        if not nxt:
            break
        parent = nxt[0]
        path.append(parent)
    return path


def recorded_plain(data: dict[str, Any], model: Model) -> list[tuple[dict[str, Any], list[int], list[int]]]:
    """Per prompt of a `pyaccel bench --json` result (`data`): its record, its prompt tokens
    (the suite text in `model`'s chat template, as the bench gave it) and plain decoding's
    output tokens (the first plain run). Each record carries the run's token limit
    (`max_tokens`, for `simulate`). Prompts whose answer ended at its first token are left
    out: there is no decode to replay (the bench leaves them out of its speeds too)."""
    texts = {p.id: p.text for s in data["setup"]["suites"] for p in load_suite(s, None, None)}
    limit = data["setup"]["max_tokens"]
    out = []
    for p in data["prompts"]:
        plain = next(r for r in p["runs"] if r["method"] == "plain")["tokens"]
        if plain:
            out.append(({**p, "max_tokens": limit}, model.chat_prompt([{"role": "user", "content": texts[p["id"]]}]),
                        plain))
    return out


def simulate(proposer: Proposer, prompt: list[int], output: list[int], rel: Callable[[int], Sequence[float]],
             max_batch: int = 64,
             on_step: Callable[[int, Draft, list[int], int], None] | None = None,
             max_tokens: int | None = None) -> dict[str, float]:
    """Speedup, steps, drafted nodes, cost (in single-token decodes) and tau of `proposer`
    reproducing `output`. `max_tokens` is the run's limit (None: the output's length). An
    output shorter than it ended with the model's end token, which the run did not know in
    advance: each step's budget is the run's (up to the limit, not the output's end), and
    the pass that gave the end token is a step too (whatever it drafted rejected), for plain
    decoding as well.
    `on_step(done, draft, path, depth)` sees each step: the output tokens committed before
    it, its draft, the draft nodes kept and the history's length at its root."""
    limit = len(output) if max_tokens is None else max_tokens
    if not output:
        raise ValueError("the output is empty: an answer that ended at its first token has no decode to replay")
    if limit < len(output):
        raise ValueError(f"max_tokens {limit} is below the output's {len(output)} tokens")
    last = len(output) + (len(output) < limit)  # the end token's pass is the last step
    proposer.begin(list(prompt), SamplingConfig())
    history = list(prompt) + [output[0]]
    done, cost, steps, drafted = 1, 0.0, 0, 0
    while done < last:
        budget = min(max_batch - 1, limit - done - 1)
        draft = proposer.propose(history, budget) if budget > 0 else Draft.empty()
        path = accept_path(draft, output[done:done + len(draft)])
        nxt = output[done + len(path)] if done + len(path) < len(output) else -1
        proposer.observe(StepOutcome(draft, path, nxt, len(history) - 1, NO_ROWS))
        if on_step is not None:
            on_step(done, draft, path, len(history))
        n = len(path) + 1
        history += output[done:done + n]
        done += n
        cost += rel(len(history))[len(draft)]
        steps += 1
        drafted += len(draft)
    proposer.end()
    passes = last - 1  # plain decoding's
    return {"speedup": passes / cost if cost else 1.0, "cost": cost, "tau": (len(output) - 1) / max(steps, 1),
            "drafted": drafted, "steps": steps}


def _pairs(items: list[str]) -> dict[str, Any]:
    return {k.strip(): parse_value(v.strip()) for k, v in (o.split("=", 1) for o in items)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a pyaccel bench --json file with plain runs")
    ap.add_argument("-m", "--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--option", action="append", default=[], help="PromptLookup argument key=value")
    ap.add_argument("--tuning", action="append", default=[], help="LookupTuning / FollowerTuning field key=value")
    args = ap.parse_args()
    data = json.loads(open(args.results, encoding="utf-8").read())
    model = Model(args.model, n_ctx=4096)
    rel = model.costs.relative_at  # the curve at a context depth
    values = ((k, ast.literal_eval(str(v)) if isinstance(v, str) else v) for k, v in _pairs(args.tuning).items())
    tuning = replace_fields(LookupTuning(), "lookup tuning",
                            **{k: (tuple(v) if isinstance(v, list) else v) for k, v in values})
    ratios = []
    proposer = PromptLookup(tuning=tuning, **_pairs(args.option))
    proposer.bind(model)  # the model's cost model and sequence limit
    for p, prompt, plain in recorded_plain(data, model):
        sim = simulate(proposer, prompt, plain, rel, max_tokens=p["max_tokens"])
        bound = oracle_speedup(prompt, plain, rel)
        measured = next((r["speedup"] for r in p["runs"] if r["method"] == "lookup"), float("nan"))
        ratios.append(sim["speedup"] / bound)
        print(f"{p['id']:34s} sim {sim['speedup']:.2f}x tau {sim['tau']:.2f} oracle {bound:.2f}x "
              f"of-oracle {sim['speedup'] / bound:.2f} measured {measured:.2f}x drafted {sim['drafted']}")
        p["sim"] = sim["speedup"]
    print(f"median sim {statistics.median(p['sim'] for p in data['prompts']):.2f}x, "
          f"median of oracle {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
