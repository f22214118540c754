"""Does host work between decodes slow the next decode? Single-token decodes of the target
behind a ~500-token context, each after GAP ms of Python busy work (--evict: after reading
64 MB through the caches first, as a step's own work on cold caches would), the gaps taking
turns; the median decode time per gap. Not a pytest module.

    python benchmarks/decode_after_work.py --gaps 0,0.2,0.5,1,3 --rounds 30
    python benchmarks/decode_after_work.py --gaps 0,0.2,1 --rounds 30 --evict
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from pyaccel import Model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--gaps", default="0,0.2,0.5,1,3", help="comma-separated gaps in ms")
    ap.add_argument("--rounds", type=int, default=30, help="rounds of 8 decodes per gap")
    ap.add_argument("--evict", action="store_true", help="read 64 MB through the caches before each gap's work")
    args = ap.parse_args()
    model = Model(args.model, n_ctx=4096, progress=False)
    backend = model.backend
    tokens = model.tokenize("Write a long essay about the history of printing. " * 20)
    backend.decode(np.asarray(tokens, np.int32), np.arange(len(tokens), dtype=np.int32))
    depth = len(tokens)
    gaps = [float(g) for g in args.gaps.split(",")]
    evict = np.ones(64 * 2**20 // 8) if args.evict else None
    medians: dict[float, list[float]] = {g: [] for g in gaps}
    for _ in range(args.rounds):
        for gap in gaps:
            times = []
            for i in range(8):
                if gap > 0:
                    start = time.perf_counter()
                    if evict is not None:
                        evict.sum()
                    while (time.perf_counter() - start) * 1e3 < gap:
                        pass
                t = time.perf_counter()
                backend.decode([tokens[i % 50]], [depth])
                times.append(time.perf_counter() - t)
                backend.kv_remove(0, depth, -1)
            medians[gap].append(statistics.median(times))
    for gap in gaps:
        print(f"{gap} ms gap: decode median {1e3 * statistics.median(medians[gap]):.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
