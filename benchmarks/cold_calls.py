"""What one call costs on caches a decode has just emptied: a Python function, a few
`pyaccel._core` calls and a few numpy operations of the sizes a proposer's step uses,
each timed alone after --evict-mb of memory is read through the caches (median of
--repeats), and warm. Explains why a step's own time runs 3-4x its warm time after a
decode (`cold_own_time.py`), and which kind of call to avoid in a per-step path. Not a
pytest module.

    python benchmarks/cold_calls.py --evict-mb 64 --repeats 300
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import numpy as np

from pyaccel import _core


def median_us(fn: Callable[[], Any], repeats: int, evict: np.ndarray | None) -> float:
    times = []
    for _ in range(repeats):
        if evict is not None:
            evict.sum()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e6 * float(np.median(times))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evict-mb", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=300)
    args = ap.parse_args()
    evict = np.ones(args.evict_mb * 2**20 // 8)
    stats = _core.AcceptanceStats([0.3] * 15, 0.98, 4.0)
    index = _core.NgramIndex(1, 4)
    index.append((np.arange(2000) % 97).astype(np.int32))
    tree = index.lookup(1, 4, 64, 4, 64)
    probs = np.random.default_rng(0).uniform(size=100)
    flags = np.random.default_rng(1).uniform(size=100) < 0.1
    parents = tree.parents

    def python_fn(x: int) -> int:
        return x + 1

    calls: dict[str, Callable[[], Any]] = {
        "a Python function": lambda: python_fn(1),
        "_core AcceptanceStats.alpha_at": lambda: stats.alpha_at(0),
        "_core AcceptanceStats.alpha (15 values)": stats.alpha,
        "_core NgramIndex.lookup (2,000 tokens)": lambda: index.lookup(1, 4, 64, 4, 64),
        "_core DraftTree.tokens": lambda: tree.tokens,
        "_core tree_depths (int32 array)": lambda: _core.tree_depths(parents),
        "numpy asarray of a 2-int list": lambda: np.asarray([1, 2], dtype=np.int32),
        "numpy max of 100 floats": probs.max,
        "max() of the same as a list": lambda: max(probs.tolist()),
        "numpy any of 100 bools": flags.any,
    }
    print(f"| call | cold us ({args.evict_mb} MB read before each) | warm us |")
    print("|---|---|---|")
    for name, fn in calls.items():
        print(f"| {name} | {median_us(fn, args.repeats, evict):.1f} | {median_us(fn, args.repeats, None):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
