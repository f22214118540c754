"""Decode times of 1, 4 and 16 tokens behind a 500-token context, in this process: run it
once per setting of libgomp's GOMP_SPINCOUNT (read when llama.cpp loads, so one process
each), the settings taking turns, idle or with busy processes beside it. Not a pytest module.

    for rep in 1 2 3 4 5 6; do for sc in 300000 100000 1000; do
        GOMP_SPINCOUNT=$sc python benchmarks/spin_count.py qwen2.5-coder-1.5b-instruct; done; done
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from pyaccel import Model


def main() -> int:
    name = sys.argv[1] if len(sys.argv) > 1 else "qwen2.5-coder-1.5b-instruct"
    model = Model(name, n_ctx=4096, n_seq_max=1, progress=False)
    backend = model.backend
    tokens = model.tokenize("Write a long essay about the history of printing. " * 40)[:500]
    backend.decode(np.asarray(tokens, np.int32), np.arange(len(tokens), dtype=np.int32))
    depth = len(tokens)

    def median_ms(size: int, repeats: int) -> float:
        times = []
        for i in range(repeats):
            t = time.perf_counter()
            backend.decode(np.asarray(tokens[i:i + size], np.int32), np.arange(depth, depth + size, dtype=np.int32))
            times.append(time.perf_counter() - t)
            backend.kv_remove(0, depth, -1)
        return 1e3 * statistics.median(times)

    print(f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT')} {name}: 1 token {median_ms(1, 60):.2f} ms, "
          f"4 tokens {median_ms(4, 20):.2f} ms, 16 tokens {median_ms(16, 10):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
