"""Does a plan of `auto` gain what it predicts, replayed without the model? Per band of
predicted speedup, what its verified plans realised on the measured cost curve, for plans
of unlearnt estimates, plans holding learnt ones (prompt lookup's copy statistics), probe
steps, and every plan made in an answer's first --opening tokens.

Each drafting step's plan predicts a speedup: expected tokens (1 + the calibrated path
probabilities of its nodes) over its pass's cost in single-token times. Replayed greedily
on plain's output (`pyaccel.bench.replay.simulate`, as `replay_passes.py`), the step
realised (1 + kept tokens) over the same cost. Pooled per band: realised = tokens / costs,
net = tokens - costs (single-token times saved; negative where the band lost), and the
share of plans that kept nothing. Own time is not counted. Not a pytest module.

--opening-margin M holds plans in an answer's first --opening tokens to M more than the
tuned margins (a what-if: bets early in a possibly short answer held to a higher bar), and
prints the geometric mean and the lowest prompts the way `replay_passes.py` does.

    python benchmarks/plan_bands.py bench-results/floor50.json --rounds 2
    python benchmarks/plan_bands.py bench-results/floor50.json --rounds 2 --opening 16 --opening-margin 0.2
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pyaccel.bench.replay import simulate
from pyaccel import Auto
from pyaccel.methods.auto.policy import AutoTuning
from pyaccel.methods.auto.policy import rejection_chance
from pyaccel.types import Draft, SamplingConfig

sys.path.insert(0, str(Path(__file__).parent))
from replay_passes import load_replay  # noqa: E402

BANDS = [(1.0, 1.05), (1.05, 1.10), (1.10, 1.15), (1.15, 1.30), (1.30, 1.50), (1.50, 2.0), (2.0, 3.0), (3.0, math.inf)]


class _Logged(Auto):
    """`Auto` that notes each plan it drafts (and can hold its first tokens to a margin more)."""

    def __init__(self, opening: int, opening_margin: float) -> None:
        super().__init__(tuning=AutoTuning())
        self.opening, self.opening_margin = opening, opening_margin
        self.start = 0
        self.depth = 0
        self.plan: dict[str, Any] | None = None

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        self.start = len(prompt)
        super().begin(prompt, sampling)

    def propose(self, tokens: list[int], budget: int) -> Draft:
        self.depth, self.plan = len(tokens), None
        return super().propose(tokens, budget)

    def _margins(self, probing: bool) -> tuple[float, float, float]:
        margin, learnt, risk = super()._margins(probing)
        if not probing and self.depth - self.start < self.opening:
            return margin + self.opening_margin, learnt + self.opening_margin, risk
        return margin, learnt, risk

    def _plan(self, tree, depth, budget, probing=False):  # type: ignore[no-untyped-def]
        plan = super()._plan(tree, depth, budget, probing)
        if plan is not None and len(plan.nodes):
            nodes = np.asarray(plan.nodes, dtype=np.int64)
            probs = self.calibration.apply(tree)
            self.plan = {"pred": float(plan.expected_speedup), "learnt": bool(tree.learnt[nodes].any()),
                         "probe": probing, "rejected_whole": rejection_chance(nodes, tree.parents, probs)}
        return plan


def _table(rows: list[dict[str, Any]], title: str) -> None:
    print(f"{title} ({len(rows)} plans)")
    print("  predicted      plans  realised       net  kept nothing  P(kept nothing) predicted")
    for lo, hi in BANDS:
        band = [r for r in rows if lo <= r["pred"] < hi]
        if band:
            tok, cost = sum(r["tokens"] for r in band), sum(r["cost"] for r in band)
            lost = statistics.mean(r["tokens"] == 1 for r in band)
            print(f"  {lo:.2f}-{hi:<8.2f} {len(band):6d} {tok / cost:9.3f} {tok - cost:+9.1f} {lost:13.2f} "
                  f"{statistics.mean(r['rejected_whole'] for r in band):18.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a pyaccel bench --json file (its plain runs are replayed)")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--rounds", type=int, default=1, help="times each prompt runs in a row, as pyaccel bench --rounds")
    ap.add_argument("--opening", type=int, default=16, help="an answer's first tokens, shown (and held) apart")
    ap.add_argument("--opening-margin", type=float, default=0.0, help="extra plan margin in the first --opening tokens")
    args = ap.parse_args()
    if args.rounds < 1 or args.opening < 0:
        raise SystemExit("--rounds must be >= 1 and --opening >= 0")
    model, recorded = load_replay(args.results, args.model, None)
    auto = _Logged(args.opening, args.opening_margin)
    auto.bind(model)
    rows: list[dict[str, Any]] = []
    speedups: dict[str, float] = {}

    def on_step(done: int, draft: Draft, path: list[int], depth: int) -> None:
        if auto.plan is not None and len(draft):
            rows.append({**auto.plan, "tokens": 1 + len(path), "cost": model.costs.relative_at(depth)[len(draft)],
                         "done": done})

    for p, prompt, output in recorded:
        runs = [simulate(auto, prompt, output, model.costs.relative_at, on_step=on_step, max_tokens=p["max_tokens"])
                for _ in range(args.rounds)]
        speedups[p["id"]] = statistics.median(r["speedup"] for r in runs)
    _table([r for r in rows if not r["learnt"] and not r["probe"]], "plans of unlearnt estimates")
    _table([r for r in rows if r["learnt"] and not r["probe"]], "plans holding learnt estimates")
    _table([r for r in rows if r["probe"]], "probe steps")
    _table([r for r in rows if r["done"] < args.opening], f"every plan in an answer's first {args.opening} tokens")
    low = sorted(speedups.items(), key=lambda kv: kv[1])[:3]
    geo = math.exp(statistics.mean(math.log(s) for s in speedups.values()))
    print(f"{len(speedups)} prompts, opening margin {args.opening_margin} over the first {args.opening} tokens: "
          f"geometric mean {geo:.4f}; lowest " + ", ".join(f"{k} {v:.4f}" for k, v in low)
          + f"; {sum(v < 0.93 for v in speedups.values())} under 0.93")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
