"""The draft method with its cost model (the default) against plain decoding, with a control.

On a CPU where drafting rarely pays, `DraftModel` must still never be slower than plain
decoding: this measures what its decisions cost (probes, the draft's catch-up). Plain,
draft and a second plain generator (the control: how much two identical methods differ
on this machine) run interleaved in a rotating order on every prompt of the given suites,
and each ratio is over the first plain run of the same round.

    python benchmarks/draft_floor.py --suite code --suite specbench:summarization \\
        --suite specbench:rag --suite specbench:writing --prompts 3 --rounds 2 --max-tokens 128
"""

from __future__ import annotations

import argparse
import statistics
import sys

from pyaccel import DraftModel, Generator, Model
from pyaccel.bench.runners import PyaccelRunner
from pyaccel.bench.suites import load_suite

LABELS = ("plain", "draft", "plain2")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--suite", action="append", default=[], help="bench suite (repeatable; default: code)")
    ap.add_argument("--prompts", type=int, default=3, help="prompts per suite")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--questions", default=None, help="Spec-Bench question file")
    args = ap.parse_args()
    model = Model(args.model, n_ctx=4096)
    method = DraftModel()
    runners = [PyaccelRunner("plain", model, Generator(model, "plain")), PyaccelRunner("draft", model, Generator(model, method)),
               PyaccelRunner("plain2", model, Generator(model, "plain"))]
    prompts = [(p.suite, model.chat_prompt([{"role": "user", "content": p.text}]))
               for s in (args.suite or ["code"]) for p in load_suite(s, args.prompts, args.questions)]
    for r in runners:
        r.run(prompts[0][1][:8], 4)
    rows: dict[str, dict[str, list[float]]] = {}
    lengths: dict[str, list[int]] = {}
    k = 0
    for rnd in range(args.rounds):
        for suite, p in prompts:
            order = runners[k % 3:] + runners[:k % 3]
            k += 1
            speed = {r.label: r.run(p, args.max_tokens).tokens_per_s for r in order}
            per = rows.setdefault(suite, {label: [] for label in LABELS[1:]})
            for label in per:
                per[label].append(speed[label] / speed["plain"])
            lengths.setdefault(suite, []).append(len(p))
            print(rnd, suite, len(p), {label: round(v, 2) for label, v in speed.items()}, file=sys.stderr, flush=True)
    print(f"draft method counters: {dict(method.counters)}\n")
    print("| suite | prompt tokens | method | median ratio to plain | min | max | runs |")
    print("|---|---|---|---|---|---|---|")
    everything: dict[str, list[float]] = {label: [] for label in LABELS[1:]}
    for suite, per in rows.items():
        span = f"{min(lengths[suite])}-{max(lengths[suite])}"
        for label, v in per.items():
            everything[label] += v
            print(f"| {suite} | {span} | {label} | {statistics.median(v):.3f} | {min(v):.3f} | {max(v):.3f} | {len(v)} |")
    for label, v in everything.items():
        print(f"| all | - | {label} | {statistics.median(v):.3f} | {min(v):.3f} | {max(v):.3f} | {len(v)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
