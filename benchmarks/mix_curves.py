"""Can a mix of proposers beat each of them alone? auto's token-only proposers (prompt
lookup and the lookahead n-gram pool, merged into one tree) replayed against each alone
over `pyaccel bench --json` runs' plain outputs, planned and priced on this machine's
measured cost curve and on flat, GPU-like curves t[b] = 1 + slope (b - 1).

Per curve: the best a draft model's chain can do when every draft token is accepted and
at 0.8 per token (each draft token costing the measured ratio of its decode to the
target's; the registry's draft model, --draft-cost to set it instead), the estimate a draft node needs before any tree holding it can pay
(n nodes together, and `policy.pay_threshold` for any n; with no margin and with auto's plan margin), each
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

--mix replaces the mix's spec (e.g. to replay auto with other tuning against the same two).
"""

from __future__ import annotations

import argparse
import json
import math
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
DEPTHS = (256, 1024, 2048)
SIZES = (1, 2, 4, 8, 16, 32, 63)


def geomean(values: list[float]) -> float:
    return math.exp(statistics.mean(math.log(v) for v in values))


def replay_run(model: Model, recorded: list, spec: str) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per suite the replayed speedups of `spec` over `recorded`'s prompts (one proposer
    carried), and the proposer's counters."""
    proposer = make_method(spec)
    proposer.bind(model)
    suites: dict[str, list[float]] = {}
    for p, prompt, plain in recorded:
        sim = simulate(proposer, prompt, plain, model.costs.relative_at, max_tokens=p["max_tokens"])
        suites.setdefault(p["suite"], []).append(sim["speedup"])
    return suites, dict(proposer.counters)


def thresholds(costs: CostModel) -> str:
    """The least average estimate n draft nodes need to beat plain decoding on `costs`,
    ((1 + margin) c(n + 1) - 1) / n, with no margin and with auto's plan margin, per depth."""
    margin = AutoTuning().plan_margin
    lines = ["| depth | 2 tokens cost | " + " | ".join(f"n={n}" for n in SIZES) + " | any n (pay_threshold) |",
             "|---|---|" + "---|" * (len(SIZES) + 1)]
    for depth in DEPTHS:
        c = costs.relative_at(depth)
        cells = [f"{(c[n] - 1) / n:.2f} / {((1 + margin) * c[n] - 1) / n:.2f}" for n in SIZES if n < len(c)]
        curve: _core.CostCurve = costs.curve(depth)
        lines.append(f"| {depth} | {c[1]:.2f} | " + " | ".join(cells) +
                     f" | {pay_threshold(curve, 63):.2f} / {pay_threshold(curve, 63, margin):.2f} |")
    return "\n".join(lines) + f"\n\n(no margin / auto's plan margin {margin:.2f})"


def draft_chains(costs: CostModel, draft_cost: float) -> str:
    """The best chain length and speedup of a draft model at `draft_cost` per draft token,
    every token accepted and each with probability 0.8, per depth:
    sum of alpha^i (i = 0..k) over c(k + 1) + k draft_cost."""
    out = []
    for depth in DEPTHS:
        c = costs.relative_at(depth)
        best = {a: max((sum(a ** i for i in range(k + 1)) / (c[k] + draft_cost * k), k) for k in range(1, len(c)))
                for a in (1.0, 0.8)}
        out.append(f"depth {depth}: " + ", ".join(f"alpha {a}: {v:.3f}x at k={k}" for a, (v, k) in best.items()))
    return f"a draft model at {draft_cost:.2f} of a target token per draft token, its best chain: " + "; ".join(out)


def report(label: str, costs: CostModel, model: Model, runs: list[tuple[str, list]], methods: dict[str, str],
           draft_cost: float) -> None:
    model.costs = costs
    print(f"\n## {label}\n\nthe least average estimate n draft nodes need to pay:\n\n{thresholds(costs)}\n\n{draft_chains(costs, draft_cost)}\n")
    print("| suite | " + " | ".join(methods) + " | mix / best single |")
    print("|---|" + "---|" * (len(methods) + 1))
    counters: Counter[str] = Counter()
    wins, overall = [], []
    for path, recorded in runs:
        medians: dict[str, dict[str, float]] = {}
        every: dict[str, list[float]] = {}
        for name, spec in methods.items():
            suites, counts = replay_run(model, recorded, spec)
            medians[name] = {s: statistics.median(v) for s, v in suites.items()}
            every[name] = [x for v in suites.values() for x in v]
            if name == "mix":
                counters.update(counts)
        for suite in medians["mix"]:
            row = {n: medians[n][suite] for n in methods}
            lead = row["mix"] / max(v for n, v in row.items() if n != "mix")
            wins += [suite] if lead > 1.0 else []
            print(f"| {suite} | " + " | ".join(f"{v:.3f}" for v in row.values()) + f" | {lead:.3f} |")
        overall.append(f"{path} ({len(every['mix'])} prompts): " + ", ".join(
            f"{n} {geomean(v):.3f}" for n, v in every.items()))
    steps = counters.get("steps", 0.0)
    parts = ", ".join(f"{k} {int(v)}" for k, v in sorted(counters.items())
                      if k.startswith(("drafting_steps", "mixed_steps", "drafted_", "accepted_", "skipped_")))
    print("\ngeometric means over prompts: " + "; ".join(overall))
    print(f"mix ahead of both on {len(wins)} suites ({', '.join(wins) or 'none'}); "
          f"mix over {int(steps)} steps: {parts}")


def measured_draft_cost(target: Model) -> float:
    """The registry draft model's decode time over the target's (cached per model pair)."""
    spec = target.registry_spec
    if spec is None or spec.draft is None:
        raise SystemExit("this model has no registry draft model: pass --draft-cost")
    draft = Model(spec.draft, n_ctx=256, progress=False)
    try:
        return target.costs.relative_token_cost(target.backend, draft.backend)
    finally:
        draft.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="pyaccel bench --json files (their plain runs are replayed)")
    ap.add_argument("--slopes", default="0.02", help="comma-separated slopes of flat curves to replay on too")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--mix", default=METHODS["mix"], help="the mix's method spec")
    ap.add_argument("--draft-cost", type=float, default=None,
                    help="a draft token's cost in target tokens (default: measured, the registry's draft model)")
    args = ap.parse_args()
    methods = {**METHODS, "mix": args.mix}
    datas = [json.loads(open(path, encoding="utf-8").read()) for path in args.results]
    model = Model(args.model, n_ctx=max(d["setup"].get("n_ctx", 4096) for d in datas), progress=False)
    runs = [(path, recorded_plain(d, model)) for path, d in zip(args.results, datas)]
    measured = model.costs
    draft_cost = args.draft_cost if args.draft_cost is not None else measured_draft_cost(model)
    report("this machine's measured curve", measured, model, runs, methods, draft_cost)
    for slope in (float(s) for s in args.slopes.split(",") if s):
        report(f"flat curve, slope {slope}", CostModel.fixed(flat_curve(slope=slope)), model, runs, methods, draft_cost)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
