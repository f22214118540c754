"""auto's plans replayed over chosen prompts of a `pyaccel bench --json` run's plain outputs:
at every step where a tree was planned, its expected speedup, whether it cleared the
margins, and its nodes' calibrated estimates, owners and tokens (the step's draft is the
plan when it did). One proposer carried over every prompt in order, each prompt run
`--rounds` times in a row as `pyaccel bench --rounds` runs it; the first round of each
chosen prompt is shown. Greedy and exact for token-only proposers
(`pyaccel.bench.replay`). Not a pytest module.

    python benchmarks/auto_plans.py bench-results/unseen46.json rag-484 --rounds 2
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pyaccel.bench.replay import simulate
from pyaccel.methods import make_method
from pyaccel.methods.auto.proposer import Auto
from pyaccel.methods.auto.policy import rejection_chance

sys.path.insert(0, str(Path(__file__).parent))
from replay_passes import load_replay, prompt_trace_args  # noqa: E402


def main() -> int:
    args = prompt_trace_args(__doc__)
    model, recorded = load_replay(args.results, args.model, None)
    auto = make_method(args.method)
    if not isinstance(auto, Auto):
        raise SystemExit(f"{args.method!r} is not an auto spec")
    auto.bind(model)
    shown = set(args.ids.split(","))
    showing = [False]
    planned = auto._plan

    def plan(tree, depth, budget, probing=False):  # type: ignore[no-untyped-def]
        chosen = planned(tree, depth, budget, probing)
        if showing[0]:
            probs = auto.calibration.apply(tree)
            best = model.costs.tree(probs, tree.parents, depth, budget)  # before the margins
            nodes = np.asarray(best.nodes, dtype=np.int64)
            if len(nodes):
                print(f"  depth {depth}: {'drafted' if chosen is not None else 'declined'}, expected "
                      f"{best.expected_speedup:.3f}x, {len(nodes)} nodes, all rejected "
                      f"{rejection_chance(nodes, tree.parents, probs):.2f}, estimates "
                      f"{np.round(probs[nodes], 3).tolist()}, owners {[tree.sources[k] for k in tree.owner[nodes]]}, "
                      f"tokens {model.detokenize([int(t) for t in tree.tokens[nodes]])!r}")
        return chosen

    auto._plan = plan  # type: ignore[method-assign]
    for p, prompt, output in recorded:
        for rnd in range(args.rounds):
            showing[0] = p["id"] in shown and rnd == 0
            if showing[0]:
                print(f"== {p['id']}")
            sim = simulate(auto, prompt, output, model.costs.relative_at, max_tokens=p["max_tokens"])
            if showing[0]:
                print(f"  speedup {sim['speedup']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
