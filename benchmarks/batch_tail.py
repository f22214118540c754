"""Verification batches past the cost model's largest measured size (64 tokens): one
decode of b tokens, every row's logits, behind 1024 cached tokens, its least wall time
over a few passes, relative to one token's. Does a draft longer than 64 tokens cost less
per token? (The cost model never plans past what it measured.) Not a pytest module.

    python benchmarks/batch_tail.py --model qwen2.5-coder-1.5b-instruct
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import pyaccel
from pyaccel.costs import _filler

SIZES = (1, 16, 32, 48, 64, 96, 128, 192, 256)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--depth", type=int, default=1024)
    ap.add_argument("--passes", type=int, default=4)
    args = ap.parse_args()
    model = pyaccel.Model(args.model, n_ctx=4096, progress=False)
    backend = model.backend
    backend.prefill(_filler(args.depth, 0, backend.n_vocab), start_pos=0)
    tokens = (np.arange(max(SIZES), dtype=np.int32) * 37 + 1000) % backend.n_vocab
    best = dict.fromkeys(SIZES, float("inf"))
    for _ in range(args.passes):  # pass by pass, so a burst of load hits one sample of each size
        for b in SIZES:
            for _ in range(max(1, 8 // b)):
                t0 = time.perf_counter()
                backend.decode(tokens[:b], np.arange(args.depth, args.depth + b), logits=np.ones(b, dtype=np.int8))
                best[b] = min(best[b], time.perf_counter() - t0)
                backend.kv_remove(0, args.depth, -1)
    print(f"{model.name}, {backend.n_threads} threads, behind {args.depth} tokens, least of {args.passes} passes")
    print("| tokens | seconds | relative to 1 | per token |")
    print("|---|---|---|---|")
    for b in SIZES:
        rel = best[b] / best[1]
        print(f"| {b} | {best[b]:.4f} | {rel:.2f} | {rel / b:.3f} |")
    model.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
