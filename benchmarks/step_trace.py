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

import sys
from pathlib import Path
from typing import Callable

from pyaccel import Model
from pyaccel.bench.replay import simulate
from pyaccel.methods import make_method
from pyaccel.types import Draft

sys.path.insert(0, str(Path(__file__).parent))
from replay_passes import load_replay, prompt_trace_args  # noqa: E402


def printer(model: Model, output: list[int]) -> Callable[[int, Draft, list[int], int], None]:
    """An `on_step` for `simulate` printing each step of one prompt whose output is `output`."""
    def show(done: int, draft: Draft, path: list[int], depth: int) -> None:
        n = len(path) + 1
        cost = model.costs.relative_at(depth)[len(draft)]
        miss = model.detokenize([int(draft.tokens[len(path)])]) if len(path) < len(draft) else ""
        print(f"{done:4d} drafted {len(draft):2d} kept {len(path):2d} cost {cost:.2f} | "
              f"{model.detokenize(output[done:done + n])!r:.70} | rejected: {miss!r}")
    return show


def main() -> int:
    args = prompt_trace_args(__doc__)
    model, recorded = load_replay(args.results, args.model, None)
    shown = set(args.ids.split(","))
    proposer = make_method(args.method)
    proposer.bind(model)
    for (p, prompt, output), rnd in ((r, k) for r in recorded for k in range(args.rounds)):
        show = None
        if p["id"] in shown:
            print(f"== {p['id']}" + (f", round {rnd + 1}" if args.rounds > 1 else ""))
            show = printer(model, output)
        simulate(proposer, prompt, output, model.costs.relative_at, on_step=show, max_tokens=p["max_tokens"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
