"""Several `pyaccel bench --json` runs of the same prompts pooled, as one run of all their
rounds: per suite and method the median over prompts of each prompt's median speedup, the
lowest of those, and one method against another prompt by prompt (geometric mean of the
ratio of their per-prompt medians, and on how many prompts the first is ahead).

    python benchmarks/pooled_rounds.py bench-results/edit41.json bench-results/edit42.json --compare auto,lookup
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path


def pooled(paths: list[str]) -> dict[tuple[str, str, str], list[float]]:
    """(suite, prompt id, method) -> every run's speedup in the files."""
    out: dict[tuple[str, str, str], list[float]] = {}
    for path in paths:
        for p in json.loads(Path(path).read_text(encoding="utf-8"))["prompts"]:
            for r in p["runs"]:
                out.setdefault((p["suite"], p["id"], r["method"]), []).append(r["speedup"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--compare", default="auto,lookup", help="two methods: the first against the second")
    args = ap.parse_args()
    runs = pooled(args.results)
    first, second = args.compare.split(",")
    suites = list(dict.fromkeys(s for s, _, _ in runs))
    methods = list(dict.fromkeys(m for _, _, m in runs))
    print("| suite | method | runs per prompt | median speedup | lowest prompt |\n|---|---|---|---|---|")
    for suite in suites:
        for m in methods:
            per = {i: v for (s, i, mm), v in runs.items() if s == suite and mm == m}
            meds = [statistics.median(v) for v in per.values()]
            n = sorted({len(v) for v in per.values()})
            print(f"| {suite} | {m} | {'/'.join(map(str, n))} | {statistics.median(meds):.3f}x | {min(meds):.2f}x |")
    print()
    for suite in suites:
        ids = [i for (s, i, m) in runs if s == suite and m == first and (s, i, second) in runs]
        logs = [math.log(statistics.median(runs[(suite, i, first)]) / statistics.median(runs[(suite, i, second)]))
                for i in ids]
        if logs:
            print(f"{suite}: {first} / {second} per prompt, geometric mean {math.exp(statistics.mean(logs)):.4f}; "
                  f"{first} ahead on {sum(x > 0 for x in logs)} of {len(logs)} prompts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
