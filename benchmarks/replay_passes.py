"""A method's passes replayed over a `pyaccel bench --json` run's plain outputs, without the
model: per prompt its steps, drafted tokens and speedup priced on the measured cost curve
(passes only, no own time), their totals and geometric mean, each suite's median, and the
method's counters at the end.

Greedy and exact for proposers that only read the tokens (`pyaccel.bench.replay.simulate`);
one proposer carried over every prompt in order. `pyaccel bench --rounds N` runs each prompt
N times in a row before the next one, with the same Generator: `--rounds N` replays that
(each prompt's speedup the median of its rounds, each suite's the median of every round's
run, as the bench's tables). `--repeats N` instead passes over all the prompts N times and
reports the last pass (what a method carries from a whole suite). Two checkouts compared
this way show which prompts' passes a change moved. Not a pytest module.

    python benchmarks/replay_passes.py bench-results/edit36.json --method auto

--curve prices (and plans) on a fixed curve instead of this machine's measured one: single-
token times relative to one token at some batch sizes, SIZE:TIME pairs, linearly
interpolated up to the largest size and used at every depth; e.g. another host's
"relative behind 1024" column from docs/benchmarks.md (the AMD EPYC host's, rows 1-64):

    --curve 1:1,2:1.63,3:2.28,4:2.78,5:3.52,6:4.07,8:6.49,10:7.39,12:8.17,16:8.69,20:11.05,24:12.87,32:14.66,48:22.92,64:24.14

--oracle adds each prompt's n-gram oracle bound on the same curve (`pyaccel.bench.oracle`: the
most any copying drafter could make of that output) and the method's share of it.

--shuffle SEED replays the prompts in another order: what a method carries from prompt to
prompt (lookup's copy statistics, auto's calibration) decides some bets, so a suite median
that moves with the order is chance, not the method.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from pyaccel import Model
from pyaccel.cost_model import CostModel
from pyaccel.bench.oracle import oracle_speedup
from pyaccel.bench.replay import recorded_plain, simulate
from pyaccel.methods import make_method


def fixed_curve(text: str) -> list[float]:
    """SIZE:TIME pairs ("1:1,2:1.63,...") interpolated at every size from 1 to the largest."""
    pairs = sorted((int(a), float(b)) for a, b in (item.split(":") for item in text.split(",")))
    if pairs[0] != (1, 1.0):
        raise SystemExit("--curve must start at 1:1 (times are relative to one token)")
    sizes, times = zip(*pairs)
    return [float(t) for t in np.interp(np.arange(1, sizes[-1] + 1), sizes, times)]


def prompt_trace_args(doc: str) -> argparse.Namespace:
    """The arguments of a tool that shows chosen prompts of a replayed run: the results file,
    the prompt ids, --method, --model and --rounds (checked)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a pyaccel bench --json file (its plain runs are replayed)")
    ap.add_argument("ids", help="prompt ids to show, comma-separated")
    ap.add_argument("--method", default="auto", help="a method spec")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--rounds", type=int, default=1, help="times each prompt runs in a row, as pyaccel bench --rounds")
    args = ap.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be >= 1")
    return args


def load_replay(results: str, model_name: str, curve: str | None) -> tuple[Model, list]:
    """The model (its cost curve replaced by `curve`, SIZE:TIME pairs, where given) and
    `recorded_plain` of a `pyaccel bench --json` file."""
    data = json.loads(open(results, encoding="utf-8").read())
    model = Model(model_name, n_ctx=data["setup"].get("n_ctx", 4096), progress=False)
    if curve:
        model.costs = CostModel.fixed(fixed_curve(curve))
    return model, recorded_plain(data, model)


def bound_replays(doc: str, method: str, example: str) -> tuple[argparse.Namespace, Model, Any, list]:
    """For a tool that replays a method over several results files: its arguments (the
    files, --model, --method defaulting to `method`, --rounds), the model, the method bound
    to it, and every file's `recorded_plain` read by that one model, in order."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--method", default=method, help=f"a {method} spec (e.g. {example})")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    model, recorded = load_replay(args.results[0], args.model, None)
    for path in args.results[1:]:
        recorded += recorded_plain(json.loads(Path(path).read_text(encoding="utf-8")), model)
    proposer = make_method(args.method)
    proposer.bind(model)
    return args, model, proposer, recorded


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a pyaccel bench --json file (its plain runs are replayed)")
    ap.add_argument("--method", default="auto", help="a method spec")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--repeats", type=int, default=1, help="passes over all the prompts (the proposer carried)")
    ap.add_argument("--rounds", type=int, default=1, help="times each prompt runs in a row, as pyaccel bench --rounds")
    ap.add_argument("--curve", help="SIZE:TIME,... a fixed relative cost curve instead of the measured one")
    ap.add_argument("--by-prefix", action="store_true",
                    help="medians per prompt-id prefix (before the last '-': a Spec-Bench category) instead of per suite")
    ap.add_argument("--oracle", action="store_true",
                    help="also each prompt's n-gram oracle bound on the same curve and the method's share of it")
    ap.add_argument("--shuffle", type=int, metavar="SEED",
                    help="replay the prompts in an order shuffled with this seed (default: the run's order)")
    args = ap.parse_args()
    if args.repeats < 1 or args.rounds < 1:
        raise SystemExit("--repeats and --rounds must be >= 1")
    model, recorded = load_replay(args.results, args.model, args.curve)
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(recorded)
    proposer = make_method(args.method)
    proposer.bind(model)
    suites: dict[str, list[float]] = {}
    last: list[dict[str, Any]] = []
    for rep in range(args.repeats):
        for p, prompt, plain in recorded:
            sims = [simulate(proposer, prompt, plain, model.costs.relative_at, max_tokens=p["max_tokens"])
                    for _ in range(args.rounds)]
            if rep == args.repeats - 1:
                speedup = statistics.median(s["speedup"] for s in sims)
                group = p["id"].rsplit("-", 1)[0] if args.by_prefix else p["suite"]
                suites.setdefault(group, []).extend(s["speedup"] for s in sims)
                last.append({**sims[-1], "speedup": speedup, "id": p["id"]})
                rounds = " rounds " + " ".join(f"{s['speedup']:.4f}" for s in sims) if args.rounds > 1 else ""
                bound = ""
                if args.oracle:
                    best = oracle_speedup(prompt, plain, model.costs.relative_at)
                    bound = f" oracle {best:.4f} share {speedup / best:.3f}"
                print(f"{p['id']:34s} steps {sims[-1]['steps']:4d} drafted {sims[-1]['drafted']:5d}{rounds} "
                      f"speedup {speedup:.4f}{bound}")
    print(f"totals (last repeat, {len(last)} prompts, the last round's steps): steps "
          f"{sum(s['steps'] for s in last):.0f}, drafted {sum(s['drafted'] for s in last):.0f}, geometric mean "
          f"speedup {math.exp(statistics.mean(math.log(s['speedup']) for s in last)):.4f}")
    low = sorted(last, key=lambda s: s["speedup"])[:3]
    print("lowest prompts: " + ", ".join(f"{s['id']} {s['speedup']:.4f}" for s in low)
          + f"; {sum(s['speedup'] < 0.93 for s in last)} of {len(last)} under 0.93")
    print("suite medians (last repeat): " + ", ".join(f"{s} {statistics.median(v):.4f}" for s, v in suites.items()))
    print("counters (all repeats):", {k: v for k, v in proposer.counters.items()
                                      if k.startswith(("steps", "drafted", "accepted", "skipped"))})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
