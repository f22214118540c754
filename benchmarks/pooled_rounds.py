"""Several `pyaccel bench --json` runs of the same prompts pooled, as one run of all their
rounds: per suite and method the median over prompts of each prompt's median speedup, the
lowest of those and the median tau of its runs, and one method against another prompt by
prompt (geometric mean of the ratio of their per-prompt medians, and on how many prompts
the first is ahead), with
95% bootstrap intervals for that geometric mean and for the ratio of the two suite medians
(prompts drawn with replacement, and each drawn prompt's runs of each method; `--bootstrap
0` leaves them out): an interval holding 1 is a difference the runs cannot tell from noise.

    python benchmarks/pooled_rounds.py bench-results/edit41.json bench-results/edit42.json --compare auto,lookup
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

import numpy as np


def pooled(paths: list[str]) -> tuple[dict[tuple[str, str, str], list[float]], dict[tuple[str, str], list[float]]]:
    """(suite, prompt id, method) -> every timed run's speedup in the files (runs with no
    decode phase to time, speedup null or 0, left out); and (suite, method) -> those runs'
    tau (where recorded)."""
    out: dict[tuple[str, str, str], list[float]] = {}
    taus: dict[tuple[str, str], list[float]] = {}
    for path in paths:
        for p in json.loads(Path(path).read_text(encoding="utf-8"))["prompts"]:
            for r in p["runs"]:
                if r["speedup"]:
                    out.setdefault((p["suite"], p["id"], r["method"]), []).append(r["speedup"])
                    if r.get("tau") is not None:
                        taus.setdefault((p["suite"], r["method"]), []).append(r["tau"])
    return out, taus


def bootstrap(first: list[list[float]], second: list[list[float]], draws: int,
              seed: int = 0) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% intervals of the per-prompt geometric mean of first / second and of the ratio of
    their suite medians (median over prompts of each prompt's median), over `draws`
    resamples of the prompts and, within each, of each method's runs. Per prompt, `first[k]`
    and `second[k]` are its runs' speedups."""
    rng = np.random.default_rng(seed)
    geo, med = [], []
    for _ in range(draws):
        picks = rng.integers(0, len(first), len(first))
        a = np.array([np.median(rng.choice(first[k], len(first[k]))) for k in picks])
        b = np.array([np.median(rng.choice(second[k], len(second[k]))) for k in picks])
        geo.append(float(np.exp(np.mean(np.log(a / b)))))
        med.append(float(np.median(a) / np.median(b)))
    return ((float(np.percentile(geo, 2.5)), float(np.percentile(geo, 97.5))),
            (float(np.percentile(med, 2.5)), float(np.percentile(med, 97.5))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--compare", default="auto,lookup", help="two methods: the first against the second")
    ap.add_argument("--bootstrap", type=int, default=2000, help="resamples for the intervals (0: none)")
    args = ap.parse_args()
    runs, taus = pooled(args.results)
    first, second = args.compare.split(",")
    suites = list(dict.fromkeys(s for s, _, _ in runs))
    methods = list(dict.fromkeys(m for _, _, m in runs))
    print("| suite | method | runs per prompt | median speedup | lowest prompt | median tau |\n|---|---|---|---|---|---|")
    for suite in suites:
        for m in methods:
            per = {i: v for (s, i, mm), v in runs.items() if s == suite and mm == m}
            meds = {i: statistics.median(v) for i, v in per.items()}
            n = sorted({len(v) for v in per.values()})
            tau = f"{statistics.median(taus[(suite, m)]):.2f}" if (suite, m) in taus else "-"
            low = min(meds, key=meds.__getitem__)
            print(f"| {suite} | {m} | {'/'.join(map(str, n))} | {statistics.median(meds.values()):.3f}x | "
                  f"{low} {meds[low]:.3f}x | {tau} |")
    print()
    for suite in suites:
        ids = [i for (s, i, m) in runs if s == suite and m == first and (s, i, second) in runs]
        logs = [math.log(statistics.median(runs[(suite, i, first)]) / statistics.median(runs[(suite, i, second)]))
                for i in ids]
        if not logs:
            continue
        line = (f"{suite}: {first} / {second} per prompt, geometric mean {math.exp(statistics.mean(logs)):.4f}; "
                f"{first} ahead on {sum(x > 0 for x in logs)} of {len(logs)} prompts")
        if args.bootstrap > 0:
            a, b = [runs[(suite, i, first)] for i in ids], [runs[(suite, i, second)] for i in ids]
            ratio = statistics.median(map(statistics.median, a)) / statistics.median(map(statistics.median, b))
            (g_lo, g_hi), (m_lo, m_hi) = bootstrap(a, b, args.bootstrap)
            line += (f"; 95% interval {g_lo:.4f}-{g_hi:.4f}; suite medians' ratio {ratio:.4f} "
                     f"(95% interval {m_lo:.4f}-{m_hi:.4f})")
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
