"""Predicted speedup of Medusa decoding on flat, GPU-like cost curves: the static tree built
from a heads file's held-out rank accuracies, planned by the core's tree planner on
t[b] = 1 + slope * (b - 1), optionally with the heads' own time added to every drafting
step. A prediction from the accuracies (not a measurement): compare its tokens per pass
with the tau `medusa_tau.py` measures.

    python benchmarks/medusa_flat.py [HEADS.gguf]     # default: the cached heads of Qwen2.5-Coder-1.5B
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyaccel import _core, registry
from pyaccel.methods.medusa.format import cached_heads_path, load_heads
from pyaccel.methods.medusa.trees import grow_tree, static_scores

CURVES = (("flat 0.02", 0.02, 0.0), ("flat 0.02, heads 0.1 of a token", 0.02, 0.1), ("flat 0.005", 0.005, 0.0))
MAX_NODES, TOPK = 64, 10


def main() -> int:
    if len(sys.argv) > 1:
        path = Path(sys.argv[1])
    else:
        name = "qwen2.5-coder-1.5b-instruct"
        path = cached_heads_path(name, registry.resolve_model(name, pull_missing=False, progress=False))
    heads = load_heads(path)
    shape = grow_tree(static_scores(heads.meta.rank_accuracy, TOPK), MAX_NODES, MAX_NODES)
    print("| curve | nodes verified | expected tokens / pass | predicted speedup |")
    print("|---|---|---|---|")
    for label, slope, heads_cost in CURVES:
        times = [1.0] + [1.0 + slope * b + heads_cost for b in range(1, MAX_NODES + 1)]
        plan = _core.tree_plan(_core.CostCurve(times), shape.score, shape.parents, MAX_NODES)
        print(f"| {label} | {len(plan.nodes)} | {plan.expected_tokens:.2f} | {plan.expected_speedup:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
