"""How well the cost curve prices a run's real target time: every run of `pyaccel bench
--json` files (plain, lookup, auto) replayed on the measured curve in seconds, and its
measured target time fitted by least squares as

    target_s = a * (the curve's seconds for the run's passes) + f * passes

The curve is each size's fastest decode, so a < 1 and f > 0 say that a real pass costs a
little less than the curve's per-token price and a little more per pass: a relative cost
of (c(k) + phi) / (1 + phi) with phi = f / (a t1). Per method, the median of real over
fitted time (what the fit leaves out, e.g. one method's passes being slower) and of real
over the curve alone. It needs runs whose passes differ in size (the edit suites): where
nearly every pass is one token (the floor suites) the two terms cannot be told apart.

    python benchmarks/pass_overhead.py bench-results/edit41.json bench-results/edit42.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pyaccel import Model
from pyaccel.bench.replay import recorded_plain, simulate
from pyaccel.methods import make_method

METHODS = ("plain", "lookup", "auto")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    args = ap.parse_args()
    model = Model(args.model, n_ctx=4096, progress=False)
    measured = model.costs.measured
    assert measured is not None, "needs the full measurement: pyaccel models costs NAME --remeasure"
    rows, real, labels, depths = [], [], [], []
    for path in args.results:
        recorded = recorded_plain(json.loads(Path(path).read_text(encoding="utf-8")), model)
        proposers = {m: make_method(m) for m in METHODS}
        for p in proposers.values():
            p.bind(model)
        for p, prompt, out in recorded:
            depths.append(len(prompt) + len(out) // 2)
            for m, proposer in proposers.items():
                sim = simulate(proposer, prompt, out, measured.seconds_at, max_tokens=p["max_tokens"])
                curve_s = sim["cost"]
                for r in p["runs"]:
                    if r["method"] == m:
                        rows.append([curve_s, sim["steps"]])
                        real.append(r["target_s"])
                        labels.append(m)
    x, y = np.asarray(rows), np.asarray(real)
    (a, f), *_ = np.linalg.lstsq(x, y, rcond=None)
    t1 = float(np.median([measured.seconds_at(d)[0] for d in depths]))
    print(f"{len(y)} runs: a = {a:.4f}, f = {1000 * f:.2f} ms per pass; t1 = {1000 * t1:.1f} ms at the median depth, "
          f"phi = {f / (a * t1):.3f}")
    fitted = x @ np.array([a, f])
    for m in METHODS:
        sel = np.array([lab == m for lab in labels])
        print(f"{m:7s} real / fitted {np.median(y[sel] / fitted[sel]):.4f}, real / curve {np.median(y[sel] / x[sel, 0]):.4f}"
              f" ({int(sel.sum())} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
