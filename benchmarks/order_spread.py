"""Two methods replayed over a `pyaccel bench --json` run's plain outputs in many prompt
orders: is a gap between their suite medians the methods, or the order the prompts came in?

What a method carries from prompt to prompt (prompt lookup's copy statistics, auto's
calibration) decides some of its bets, so one order is one sample. Per order (seed 1..N,
`--orders`) this prints each suite's median and the geometric mean of both methods, priced
on the measured cost curve (or a fixed one, `--curve` as in `replay_passes.py`), each
method carried over the prompts with each prompt run `--rounds` times in a row, as
`pyaccel bench --rounds` runs it; then in how many orders A's median was at least B's per
suite, and per prompt the mean of A's speedup over B's across the orders (each the median
of its rounds). Passes only, no own time; greedy and exact for proposers that
only read the tokens. Not a pytest module.

    python benchmarks/order_spread.py bench-results/edit45.json auto lookup --orders 12
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

from pyaccel import Model
from pyaccel.bench.replay import simulate
from pyaccel.methods import make_method

sys.path.insert(0, str(Path(__file__).parent))
from replay_passes import load_replay  # noqa: E402


def replay(model: Model, recorded: list, method: str, rounds: int, repeats: int) -> dict[str, list[float]]:
    """Speedups per prompt id, one per round (each prompt `rounds` times in a row, as
    `pyaccel bench --rounds`), on the last of `repeats` passes over `recorded` (one proposer)."""
    proposer = make_method(method)
    proposer.bind(model)
    out: dict[str, list[float]] = {}
    for rep in range(repeats):
        for p, prompt, plain in recorded:
            runs = [simulate(proposer, prompt, plain, model.costs.relative_at, max_tokens=p["max_tokens"])["speedup"] for _ in range(rounds)]
            if rep == repeats - 1:
                out[p["id"]] = runs
    return out


def summary(speedups: dict[str, list[float]], suite_of: dict[str, str]) -> tuple[dict[str, float], float]:
    """Each suite's median over every round's run (as the bench's tables) and the geometric
    mean of the prompts' medians."""
    suites: dict[str, list[float]] = {}
    for pid, runs in speedups.items():
        suites.setdefault(suite_of[pid], []).extend(runs)
    gm = math.exp(statistics.mean(math.log(statistics.median(r)) for r in speedups.values()))
    return {k: statistics.median(v) for k, v in suites.items()}, gm


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a pyaccel bench --json file (its plain runs are replayed)")
    ap.add_argument("a", help="a method spec")
    ap.add_argument("b", help="the method spec it is compared with")
    ap.add_argument("--orders", type=int, default=12, help="shuffled prompt orders (seeds 1..N)")
    ap.add_argument("--rounds", type=int, default=2, help="times each prompt runs in a row, as pyaccel bench --rounds")
    ap.add_argument("--repeats", type=int, default=1, help="passes over all the prompts (the proposer carried)")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--curve", help="SIZE:TIME,... a fixed relative cost curve instead of the measured one")
    args = ap.parse_args()
    if min(args.orders, args.rounds, args.repeats) < 1:
        raise SystemExit("--orders, --rounds and --repeats must be >= 1")
    model, recorded = load_replay(args.results, args.model, args.curve)
    suite_of = {p["id"]: p["suite"] for p, _, _ in recorded}
    wins: dict[str, int] = {}
    ratios: dict[str, list[float]] = {pid: [] for pid in suite_of}
    for seed in range(1, args.orders + 1):
        order = list(recorded)
        random.Random(seed).shuffle(order)
        sa = replay(model, order, args.a, args.rounds, args.repeats)
        sb = replay(model, order, args.b, args.rounds, args.repeats)
        (ma, ga), (mb, gb) = summary(sa, suite_of), summary(sb, suite_of)
        cells = []
        for suite in ma:
            wins[suite] = wins.get(suite, 0) + (ma[suite] >= mb[suite])
            cells.append(f"{suite} {ma[suite]:.4f} / {mb[suite]:.4f}")
        print(f"order {seed:2d}: geometric mean {ga:.4f} / {gb:.4f}; medians " + ", ".join(cells))
        for pid in sa:
            ratios[pid].append(statistics.median(sa[pid]) / statistics.median(sb[pid]))
    print(f"{args.a} median >= {args.b} median in: "
          + ", ".join(f"{suite} {n} of {args.orders} orders" for suite, n in wins.items()))
    print(f"per prompt, mean of {args.a} / {args.b} over the orders (min-max):")
    for pid, rs in sorted(ratios.items(), key=lambda kv: statistics.mean(kv[1])):
        print(f"  {pid:34s} {statistics.mean(rs):.3f} ({min(rs):.3f}-{max(rs):.3f})  {suite_of[pid]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
