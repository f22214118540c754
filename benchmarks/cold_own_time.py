"""A method's own time per step as it is paid in a real generation: on caches a decode
has just emptied.

A decode step of a 1.5B model streams a gigabyte of weights through the CPU's caches, so
the proposer's Python step that follows runs cold: the code, the interpreter's objects and
numpy's machinery come back from memory. This replays each method (greedy, without the
model: `pyaccel.bench.replay.simulate`) over the plain outputs of a `pyaccel bench --json`
run, times its propose and observe calls with perf_counter, and before each call streams
--evict-mb of memory through the caches (0: warm, as a plain replay runs). Methods take
turns, --repeats times over the same prompts (one proposer per method, carried over as in
the bench); the median of the repeats is reported per method. Not a pytest module.

    python benchmarks/cold_own_time.py bench-results/floor38.json --methods plain,lookup,auto \
        --prompts 14 --evict-mb 64
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable

import numpy as np

from pyaccel import Model
from pyaccel.bench.replay import recorded_plain, simulate
from pyaccel.methods import make_method
from pyaccel.methods.base import Proposer


def _timed(fn: Callable[..., Any], spent: list[float], evict: np.ndarray | None) -> Callable[..., Any]:
    """fn, with `evict` read through before it and its time added to spent[0]."""

    def call(*args: Any) -> Any:
        if evict is not None:
            evict.sum()
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            spent[0] += time.perf_counter() - t

    return call


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a pyaccel bench --json file (its plain runs are replayed)")
    ap.add_argument("--methods", default="plain,auto", help="comma-separated method specs")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--prompts", type=int, default=None, help="the first N prompts of the file")
    ap.add_argument("--evict-mb", type=int, default=64, help="memory streamed before each call (0: none)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    data = json.loads(open(args.results, encoding="utf-8").read())
    model = Model(args.model, n_ctx=data["setup"].get("n_ctx", 4096), progress=False)
    items = [(prompt, plain, p["max_tokens"]) for p, prompt, plain in recorded_plain(data, model)][:args.prompts]
    evict = np.ones(args.evict_mb * 2**20 // 8) if args.evict_mb else None
    spent: dict[str, list[float]] = {}
    proposers: dict[str, Proposer] = {}
    for spec in args.methods.split(","):
        prop = proposers[spec] = make_method(spec)
        prop.bind(model)
        spent[spec] = [0.0]
        prop.propose = _timed(prop.propose, spent[spec], evict)  # type: ignore[method-assign]
        prop.observe = _timed(prop.observe, spent[spec], evict)  # type: ignore[method-assign]
    per_step: dict[str, list[float]] = {spec: [] for spec in proposers}
    rel = model.costs.relative_at
    for rep in range(args.repeats):
        for spec, prop in proposers.items():
            spent[spec][0] = 0.0
            steps = sum(simulate(prop, prompt, out, rel, max_tokens=limit)["steps"] for prompt, out, limit in items)
            per_step[spec].append(1e6 * spent[spec][0] / steps)
            print(f"repeat {rep + 1}: {spec}: {per_step[spec][-1]:.1f} us/step over {steps} steps", flush=True)
    print(f"\n{len(items)} prompts, {args.evict_mb} MB streamed before each call; median of {args.repeats}:")
    for spec, values in per_step.items():
        print(f"  {spec:12s} {statistics.median(values):7.1f} us/step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
