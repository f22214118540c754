"""The draft method with its cost model (the default) against plain decoding, with a control.

On a CPU where even a perfectly accepted draft cannot pay, `DraftModel` decides never to
draft; this measures what that decision costs: plain, draft and a second plain generator
(the control: how much two identical methods differ on this machine) run interleaved in
a rotating order, and each ratio is over the first plain run of the same round.

    python benchmarks/draft_floor.py --rounds 6 --max-tokens 96
"""

from __future__ import annotations

import argparse
import statistics
import sys

from pyaccel import DraftModel, Generator, Model
from pyaccel.bench.runners import PyaccelRunner

PROMPTS = ("Write a Python function that merges two sorted lists.",
           "Describe a sunrise over the sea in a short poem.",
           "Explain how a hash map works.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    model = Model(args.model, n_ctx=2048)
    method = DraftModel()
    runners = [PyaccelRunner("plain", model, Generator(model)), PyaccelRunner("draft", model, Generator(model, method)),
               PyaccelRunner("plain2", model, Generator(model))]
    print(f"draft method: {dict(method.counters)}", file=sys.stderr)
    prompts = [model.chat_prompt([{"role": "user", "content": t}]) for t in PROMPTS]
    for r in runners:
        r.run(prompts[0][:8], 4)
    ratios: dict[str, list[float]] = {"draft": [], "plain2": []}
    k = 0
    for rnd in range(args.rounds):
        for p in prompts:
            order = runners[k % 3:] + runners[:k % 3]
            k += 1
            speed = {r.label: r.run(p, args.max_tokens).tokens_per_s for r in order}
            for label in ratios:
                ratios[label].append(speed[label] / speed["plain"])
            print(rnd, {label: round(v, 2) for label, v in speed.items()}, file=sys.stderr, flush=True)
    print("| method | median ratio to plain | min | max | runs |")
    print("|---|---|---|---|---|")
    for label, v in ratios.items():
        print(f"| {label} | {statistics.median(v):.3f} | {min(v):.3f} | {max(v):.3f} | {len(v)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
