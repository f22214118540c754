"""A method's passes replayed over a `pyaccel bench --json` run's plain outputs, without the
model: per prompt its steps, drafted tokens and speedup priced on the measured cost curve
(passes only, no own time), their totals and geometric mean, each suite's median, and the
method's counters at the end.

Greedy and exact for proposers that only read the tokens (`pyaccel.bench.replay.simulate`);
one proposer carried over every prompt in order, --repeats times, as `pyaccel bench` does.
Two checkouts compared this way show which prompts' passes a change moved. Not a pytest
module.

    python benchmarks/replay_passes.py bench-results/edit36.json --method auto
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

from pyaccel import Model
from pyaccel.bench.replay import recorded_plain, simulate
from pyaccel.methods import make_method


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a pyaccel bench --json file (its plain runs are replayed)")
    ap.add_argument("--method", default="auto", help="a method spec")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--repeats", type=int, default=1, help="passes over all the prompts (the proposer carried)")
    args = ap.parse_args()
    data = json.loads(open(args.results, encoding="utf-8").read())
    model = Model(args.model, n_ctx=data["setup"].get("n_ctx", 4096), progress=False)
    recorded = recorded_plain(data, model)
    proposer = make_method(args.method)
    proposer.bind(model)
    suites: dict[str, list[float]] = {}
    last: list[dict[str, float]] = []
    for rep in range(args.repeats):
        for p, prompt, plain in recorded:
            sim = simulate(proposer, prompt, plain, model.costs.relative_at)
            if rep == args.repeats - 1:
                suites.setdefault(p["suite"], []).append(sim["speedup"])
                last.append(sim)
                print(f"{p['id']:34s} steps {sim['steps']:4d} drafted {sim['drafted']:5d} "
                      f"speedup {sim['speedup']:.4f}")
    print(f"totals (last repeat, {len(last)} prompts): steps {sum(s['steps'] for s in last):.0f}, "
          f"drafted {sum(s['drafted'] for s in last):.0f}, geometric mean speedup "
          f"{math.exp(statistics.mean(math.log(s['speedup']) for s in last)):.4f}")
    print("suite medians (last repeat): " + ", ".join(f"{s} {statistics.median(v):.4f}" for s, v in suites.items()))
    print("counters (all repeats):", {k: v for k, v in proposer.counters.items()
                                      if k.startswith(("steps", "drafted", "accepted", "skipped"))})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
