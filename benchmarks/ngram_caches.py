"""Does each n-gram cache help? Prompt lookup vs n-gram cache drafting with the context
cache only, + the dynamic cache, + a static cache, each against plain decoding.

    python benchmarks/ngram_caches.py --static stdlib.ngc [-m MODEL] [--max-tokens 128]

Greedy; every prompt runs each method once, plain first, after the target cache is
emptied. "context" and "context+static" get a fresh drafter per prompt (an empty dynamic cache);
"+dynamic" and "all three" keep one drafter over the prompts, so prompt k drafts from
prompts < k, and in a second round ("repeat") from its own earlier pass too.
"""

from __future__ import annotations

import argparse
import functools
import statistics
from typing import Callable

import pyaccel
from pyaccel.methods.lookup import PromptLookup

PROMPTS = [
    "Write a Python class `Stack` with push, pop, peek, is_empty and __len__ methods, "
    "each with a docstring and type hints.",
    "Here is a function:\n\ndef mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n"
    "    return total / len(xs)\n\nRewrite it to raise ValueError on an empty list and add a "
    "docstring. Show the whole function.",
    "Write a Python function that parses command line arguments with argparse: --input, "
    "--output, --verbose and --limit (an int), and returns the namespace.",
]


def _run(model: pyaccel.Model, method: object, prompt: list[int], max_tokens: int) -> pyaccel.Stats:
    model.cache.truncate(0)
    return pyaccel.Generator(model, method).generate(prompt, max_tokens=max_tokens).stats  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--static", required=True, help="static cache from `pyaccel ngram build`")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--length", type=int, default=None,
                    help="fixed draft length (default: the cost model decides, which on a small CPU may be 0)")
    args = ap.parse_args()
    model = pyaccel.Model(args.model, n_ctx=2048)
    prompts = [model.chat_prompt([{"role": "user", "content": p}]) for p in PROMPTS]
    ngram = functools.partial(pyaccel.NgramCacheDrafter, length=args.length)
    dynamic = ngram()
    everything = ngram(static_path=args.static)
    methods: dict[str, Callable[[], object]] = {
        "lookup": functools.partial(PromptLookup, length=args.length),
        "ngram context": ngram,
        "ngram context+dynamic": lambda: dynamic,
        "ngram context+static": lambda: ngram(static_path=args.static),
        "ngram all three": lambda: everything,
    }
    rows: dict[str, list[tuple[float, float, float]]] = {"plain": []}
    for round_ in range(2):  # round 1: only the drafters that remember, on repeated prompts
        for prompt in prompts:
            plain = _run(model, None, prompt, args.max_tokens)
            rows["plain"].append((plain.tau, 1.0, 0.0))
            for name, make in methods.items():
                if round_ == 1 and name not in ("ngram context+dynamic", "ngram all three"):
                    continue
                s = _run(model, make(), prompt, args.max_tokens)
                label = name if round_ == 0 else f"{name}, repeat"
                rows.setdefault(label, []).append((s.tau, s.tokens_per_s / plain.tokens_per_s, s.acceptance_rate))
    sizing = f"length {args.length}" if args.length is not None else "cost model"
    print(f"{model.name}, {len(prompts)} prompts x {args.max_tokens} tokens, {sizing}, medians")
    print("| method | tau | speedup | acceptance |\n|---|---|---|---|")
    for name, vals in rows.items():
        tau, speed, acc = (statistics.median(v[i] for v in vals) for i in range(3))
        print(f"| {name} | {tau:.2f} | {speed:.2f} | {acc:.2f} |")


if __name__ == "__main__":
    main()
