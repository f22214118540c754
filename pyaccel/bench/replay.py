"""Replay a greedy proposer against recorded plain greedy outputs, without the model.

Under greedy decoding an n-gram proposer's outcome is fully determined by the plain
output: this replays `pyaccel bench --json` results (plain's tokens per prompt), runs the
proposer step by step, accepts the longest draft path that matches the output, and prices
each step with the measured cost curve at its context depth. Its simulated speedup and
the oracle bound use the same curves, so proposer changes can be compared in seconds
instead of a benchmark hour.

    python benchmarks/sim_lookup.py bench-results/edit2.json [--option key=value ...]
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
from typing import Any, Callable, Sequence

import numpy as np

from pyaccel import Model
from pyaccel.bench_oracle import oracle_speedup
from pyaccel.bench_runners import parse_value
from pyaccel.bench_suites import load_suite
from pyaccel.costs import decode_costs
from pyaccel.lookup import PromptLookup
from pyaccel.types import Draft, SamplingConfig


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


def simulate(proposer: Any, prompt: list[int], output: list[int], rel: Callable[[int], Sequence[float]],
             max_batch: int = 64) -> dict[str, float]:
    """Steps, cost (in single-token decodes) and tau of `proposer` reproducing `output`."""
    proposer.begin(list(prompt), SamplingConfig())
    history = list(prompt) + [output[0]]
    done, cost, steps, drafted = 1, 0.0, 0, 0
    while done < len(output):
        budget = min(max_batch - 1, len(output) - done - 1)
        draft = proposer.propose(history, budget) if budget > 0 else Draft.empty()
        path = accept_path(draft, output[done:done + len(draft)])
        proposer.observe(draft, path, output[done + len(path)] if done + len(path) < len(output) else -1)
        n = len(path) + 1
        history += output[done:done + n]
        done += n
        cost += rel(len(history))[len(draft)]
        steps += 1
        drafted += len(draft)
    proposer.end()
    decoded = len(output) - 1
    return {"speedup": decoded / cost if cost else 1.0, "tau": decoded / max(steps, 1), "drafted": drafted,
            "steps": steps}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a pyaccel bench --json file with plain runs")
    ap.add_argument("-m", "--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--option", action="append", default=[], help="PromptLookup option key=value")
    args = ap.parse_args()
    data = json.loads(open(args.results, encoding="utf-8").read())
    model = Model(args.model, n_ctx=4096)
    rel = decode_costs(model.backend).relative_at  # the curve at a context depth
    options = {k: (ast.literal_eval(v) if k.isupper() else parse_value(v))
               for k, v in (o.split("=", 1) for o in args.option)}
    import pyaccel.lookup as lookup_module
    import pyaccel.rewrites as rewrites_module
    for key in [k for k in options if k.isupper()]:  # module constants, e.g. STATS_DECAY=0.99
        value = options.pop(key)
        for module in (lookup_module, rewrites_module):
            if hasattr(module, key):
                setattr(module, key, value)
    texts = {p.id: p.text for s in data["setup"]["suites"] for p in load_suite(s, None, None)}
    ratios = []
    proposer = PromptLookup(progress=False, **options)
    proposer.bind(model)  # the model's cached cost curve and sequence limit
    for p in data["prompts"]:
        plain = next(r for r in p["runs"] if r["method"] == "plain")
        prompt = model.chat_prompt([{"role": "user", "content": texts[p["id"]]}])
        sim = simulate(proposer, prompt, plain["tokens"], rel)
        bound = oracle_speedup(prompt, plain["tokens"], rel)
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
