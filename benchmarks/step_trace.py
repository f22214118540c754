"""Every step of a method replayed over chosen prompts of a `pyaccel bench --json` run's
plain outputs: the root position, the drafted and the kept tokens, the pass's cost on the
measured curve (single-token times) and the text committed (the first rejected draft token
after it). One proposer carried over every prompt in order, each prompt replayed `--rounds`
times in a row as `pyaccel bench --rounds` runs it (every round of a shown prompt is
printed), so a prompt's steps depend on the prompts and rounds before it. Greedy and exact
for token-only proposers (`pyaccel.bench.replay`). Not a pytest module.

    python benchmarks/step_trace.py bench-results/floor44.json rag-483 --method auto
"""

from __future__ import annotations

import argparse
import json

from pyaccel import Model
from pyaccel.bench.replay import NO_ROWS, accept_path, recorded_plain
from pyaccel.methods import make_method
from pyaccel.types import Draft, SamplingConfig, StepOutcome


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a pyaccel bench --json file (its plain runs are replayed)")
    ap.add_argument("ids", help="prompt ids to show, comma-separated")
    ap.add_argument("--method", default="auto", help="a method spec")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--rounds", type=int, default=1, help="times each prompt runs in a row, as pyaccel bench --rounds")
    args = ap.parse_args()
    data = json.loads(open(args.results, encoding="utf-8").read())
    model = Model(args.model, n_ctx=data["setup"].get("n_ctx", 4096), progress=False)
    shown = set(args.ids.split(","))
    proposer = make_method(args.method)
    proposer.bind(model)
    if args.rounds < 1:
        raise SystemExit("--rounds must be >= 1")
    for (p, prompt, output), rnd in ((r, k) for r in recorded_plain(data, model) for k in range(args.rounds)):
        proposer.begin(list(prompt), SamplingConfig())
        history, done = list(prompt) + [output[0]], 1
        if p["id"] in shown:
            print(f"== {p['id']}" + (f", round {rnd + 1}" if args.rounds > 1 else ""))
        while done < len(output):
            budget = min(63, len(output) - done - 1)  # a 64-token batch, as `simulate` prices
            draft = proposer.propose(history, budget) if budget > 0 else Draft.empty()
            path = accept_path(draft, output[done:done + len(draft)])
            nxt = output[done + len(path)] if done + len(path) < len(output) else -1
            proposer.observe(StepOutcome(draft, path, nxt, len(history) - 1, NO_ROWS))
            n = len(path) + 1
            if p["id"] in shown:
                cost = model.costs.relative_at(len(history))[len(draft)]
                miss = model.detokenize([int(draft.tokens[len(path)])]) if len(path) < len(draft) else ""
                print(f"{done:4d} drafted {len(draft):2d} kept {len(path):2d} cost {cost:.2f} | "
                      f"{model.detokenize(output[done:done + n])!r:.70} | rejected: {miss!r}")
            history += output[done:done + n]
            done += n
        proposer.end()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
