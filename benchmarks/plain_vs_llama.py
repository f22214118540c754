"""Plain greedy decoding through pyaccel versus llama-cpp-python's `Llama.generate`.

Interleaved A/B: each prompt and round runs every variant once, in a rotating order, and
a variant's ratio is its decode tokens/s over `Llama`'s in the same round. Variants differ
in context settings (flash attention, n_seq_max) so the default can be chosen on data.

    python benchmarks/plain_vs_llama.py --prompts 4 --rounds 3 --max-tokens 128
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from pyaccel import Generator, Model
from pyaccel.bench.runners import LlamaRunner, PyaccelRunner, Run
from pyaccel.bench.suites import load_suite
from pyaccel.methods import make_method

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "fa-off": {"flash_attn": False},
    "fa-on": {"flash_attn": True},
    "nseq1": {"n_seq_max": 1},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--suite", default="edit")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()

    import llama_cpp

    names = [v for v in args.variants.split(",") if v]
    runners: list[Any] = []
    first = None
    for name in names:
        model = Model(args.model, n_ctx=args.n_ctx, **VARIANTS[name])
        first = first or model
        runners.append(PyaccelRunner(name, model, Generator(model, make_method("plain"))))
    llm = llama_cpp.Llama(str(first.path), n_ctx=args.n_ctx, n_threads=first.backend.n_threads,
                          n_threads_batch=first.backend.n_threads, verbose=False)
    runners.append(LlamaRunner("llama-plain", llm, first))
    warm = first.tokenize("Hello")
    for r in runners:
        r.run(warm, 4)

    ratios: dict[str, list[float]] = {n: [] for n in names}
    speeds: dict[str, list[float]] = {n: [] for n in names + ["llama-plain"]}
    prompts = load_suite(args.suite, args.prompts, None)
    k = 0
    for p in prompts:
        tokens = first.chat_prompt([{"role": "user", "content": p.text}])
        for rnd in range(args.rounds):
            order = runners[k % len(runners):] + runners[:k % len(runners)]
            k += 1
            runs: dict[str, Run] = {r.label: r.run(tokens, args.max_tokens) for r in order}
            base = runs["llama-plain"].tokens_per_s
            for label, run in runs.items():
                speeds[label].append(run.tokens_per_s)
            for n in names:
                ratios[n].append(runs[n].tokens_per_s / base)
            print(f"{p.id} round {rnd + 1}: " + ", ".join(f"{l} {r.tokens_per_s:.2f}" for l, r in runs.items()),
                  file=sys.stderr, flush=True)
    print("| variant | median ratio to Llama | min | max | median tok/s |")
    print("|---|---|---|---|---|")
    for n in names:
        rs = ratios[n]
        print(f"| {n} | {statistics.median(rs):.3f} | {min(rs):.3f} | {max(rs):.3f} | "
              f"{statistics.median(speeds[n]):.2f} |")
    print(f"| llama-plain | 1.000 | - | - | {statistics.median(speeds['llama-plain']):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
