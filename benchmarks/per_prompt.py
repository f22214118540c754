"""Per-prompt medians of one method in a `pyaccel bench --json` run, and the median over
prompts whose id starts with a prefix (e.g. the copy-dominant renames).

    python benchmarks/per_prompt.py bench-results/edit7.json --method lookup --prefix rename-
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--method", default="lookup")
    ap.add_argument("--prefix", default="")
    args = ap.parse_args()
    data = json.loads(Path(args.results).read_text(encoding="utf-8"))
    chosen = []
    print("| prompt | speedups | median | tau | oracle | of oracle |\n|---|---|---|---|---|---|")
    for p in data["prompts"]:
        runs = [r for r in p["runs"] if r["method"] == args.method and r["speedup"]]
        if not runs or not p["id"].startswith(args.prefix):
            continue
        med = statistics.median(r["speedup"] for r in runs)
        taus = [r["tau"] for r in runs if r.get("tau") is not None]
        tau = f"{statistics.median(taus):.2f}" if taus else "-"
        bound = p.get("oracle_speedup")
        of = f"{med / bound:.2f}" if bound else "-"
        each = " ".join(f"{r['speedup']:.2f}x" for r in runs)
        shown = f"{bound:.2f}x" if bound else "-"
        print(f"| {p['id']} | {each} | {med:.2f}x | {tau} | {shown} | {of} |")
        chosen.append(med)
    if not chosen:
        ids = sorted({p["id"].rsplit("-", 1)[0] for p in data["prompts"]})
        print(f"\nno {args.method} runs on prompts whose id starts with {args.prefix!r}; ids start with: "
              + ", ".join(ids))
        return 1
    print(f"\nmedian over {len(chosen)} prompts: {statistics.median(chosen):.2f}x "
          f"(min {min(chosen):.2f}x, max {max(chosen):.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
