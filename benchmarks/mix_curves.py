"""Can a mix of proposers beat each of them alone? auto's token-only proposers (prompt
lookup and the lookahead n-gram pool, merged into one tree) replayed against each alone
over `pyaccel bench --json` runs' plain outputs, planned and priced on this machine's
measured cost curve and on flat, GPU-like curves t[b] = 1 + slope (b - 1).

Per curve: the estimate a draft node needs before any tree holding it can pay
(`policy.pay_threshold` at depth 512, with no margin and with auto's plan margin), each
suite's median replayed speedup per method (passes only, no own time), the suites where
the mix beats both, and the mix's steps by who drafted them.

    mix    auto with lookup and the pool (no draft model, no Medusa heads: they are not
           token-only, so a replay cannot run them)
    lookup method "lookup"
    pool   auto with the pool alone (lookahead's n-gram pool, no Jacobi window)

Greedy and exact (`pyaccel.bench.replay.simulate`); one proposer per method and curve
carried over a run's prompts in order, as `pyaccel bench` does. A prediction of the
passes, not a timing: on a GPU a step's own time is a larger share of a pass than here.
Not a pytest module.

    python benchmarks/mix_curves.py bench-results/floor41.json bench-results/edit41.json --slopes 0.02,0.005
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter

from pyaccel import Model, _core
from pyaccel.bench.costs_report import flat_curve
from pyaccel.bench.replay import recorded_plain, simulate
from pyaccel.cost_model import CostModel
from pyaccel.methods import make_method
from pyaccel.methods.auto.policy import AutoTuning, pay_threshold

METHODS = {"mix": "auto:use_draft=false,medusa=false",
           "lookup": "lookup",
           "pool": "auto:lookup=false,use_draft=false,medusa=false"}
DEPTH = 512


def replay_run(model: Model, recorded: list, spec: str) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per suite the replayed speedups of `spec` over `recorded`'s prompts (one proposer
    carried), and the proposer's counters."""
    proposer = make_method(spec)
    proposer.bind(model)
    suites: dict[str, list[float]] = {}
    for p, prompt, plain in recorded:
        sim = simulate(proposer, prompt, plain, model.costs.relative_at)
        suites.setdefault(p["suite"], []).append(sim["speedup"])
    return suites, dict(proposer.counters)


def thresholds(costs: CostModel) -> str:
    curve: _core.CostCurve = costs.curve(DEPTH)
    margin = AutoTuning().plan_margin
    c2 = costs.relative_at(DEPTH)[1]
    return (f"2 tokens cost {c2:.2f}; a node must be accepted with P >= {pay_threshold(curve, 63):.2f} to pay at all, "
            f">= {pay_threshold(curve, 63, margin):.2f} at auto's plan margin {margin:.2f}")


def report(label: str, costs: CostModel, model: Model, runs: list[tuple[str, list]]) -> None:
    model.costs = costs
    print(f"\n## {label}: {thresholds(costs)}\n")
    print("| suite | " + " | ".join(METHODS) + " | mix / best single |")
    print("|---|" + "---|" * (len(METHODS) + 1))
    counters: Counter[str] = Counter()
    wins = []
    for _, recorded in runs:
        medians: dict[str, dict[str, float]] = {}
        for name, spec in METHODS.items():
            suites, counts = replay_run(model, recorded, spec)
            medians[name] = {s: statistics.median(v) for s, v in suites.items()}
            if name == "mix":
                counters.update(counts)
        for suite in medians["mix"]:
            row = {n: medians[n][suite] for n in METHODS}
            lead = row["mix"] / max(v for n, v in row.items() if n != "mix")
            wins += [suite] if lead > 1.0 else []
            print(f"| {suite} | " + " | ".join(f"{v:.3f}" for v in row.values()) + f" | {lead:.3f} |")
    steps = counters.get("steps", 0.0)
    parts = ", ".join(f"{k} {int(v)}" for k, v in sorted(counters.items())
                      if k.startswith(("drafting_steps", "mixed_steps", "drafted_", "accepted_")))
    print(f"\nmix ahead of both on {len(wins)} suites ({', '.join(wins) or 'none'}); "
          f"mix over {int(steps)} steps: {parts}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="pyaccel bench --json files (their plain runs are replayed)")
    ap.add_argument("--slopes", default="0.02", help="comma-separated slopes of flat curves to replay on too")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    args = ap.parse_args()
    datas = [json.loads(open(path, encoding="utf-8").read()) for path in args.results]
    model = Model(args.model, n_ctx=max(d["setup"].get("n_ctx", 4096) for d in datas), progress=False)
    runs = [(path, recorded_plain(d, model)) for path, d in zip(args.results, datas)]
    measured = model.costs
    report("this machine's measured curve", measured, model, runs)
    for slope in (float(s) for s in args.slopes.split(",") if s):
        report(f"flat curve, slope {slope}", CostModel.fixed(flat_curve(slope=slope)), model, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
